"""Model shapes: a target's or drafter's architecture without its weights, served with ``--load-format dummy``.

A GPU machine without a model's weights (air-gapped, or before a team has chosen a drafter) can
still measure what the engine does with that shape: step costs, and speedups at a chosen
acceptance (``rejection_sample_method: synthetic``). ``build`` writes a folder vLLM serves: the
architecture's public ``config.json`` values, and the small demo model's real tokenizer and chat
template, its vocabulary padded with never-produced tokens up to the shape's size (dummy weights
sample any id, and every id must decode). Prompts tokenize as SmolLM2 splits them (a little
longer than the shape's own tokenizer would), which the GPU notes count among the gaps.

    build_all(tokenizer_dir=models.model_paths().target)   # every shape under the models folder
    presets: model = "local:shape-Qwen3-32B", engine_args.load_format = "dummy"
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from specscope import settings
from specscope.engine import models
from specscope.errors import ConfigError

__all__ = ["SHAPES", "PREFIX", "build", "build_all"]

PREFIX = "shape-"
TOKENIZER_FILES = ("tokenizer_config.json", "chat_template.jinja")

_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "rms_norm_eps": 1e-05,
    "vocab_size": 128256,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "dtype": "bfloat16",
    "max_position_embeddings": 131072,
    "rope_parameters": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    },
}
_QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_act": "silu",
    "attention_bias": False,
    "rms_norm_eps": 1e-06,
    "vocab_size": 151936,
    "head_dim": 128,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "dtype": "bfloat16",
    "max_position_embeddings": 40960,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
}
# A one-layer EAGLE-3 head on the target's width: 3 target layers in, a 32k draft vocabulary out.
_EAGLE3 = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_act": "silu",
    "num_hidden_layers": 1,
    "rms_norm_eps": 1e-06,
    "draft_vocab_size": 32000,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "dtype": "bfloat16",
    "tie_word_embeddings": False,
}

# Public config.json values of each architecture (hidden sizes, layers, heads, vocabulary).
SHAPES: dict[str, dict] = {
    "Llama-3.1-8B": {
        **_LLAMA,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "tie_word_embeddings": False,
    },
    "Llama-3.2-1B": {
        **_LLAMA,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "tie_word_embeddings": True,
        "rope_parameters": {**_LLAMA["rope_parameters"], "factor": 32.0},
    },
    "Llama-3.1-8B-eagle3": {
        **_EAGLE3,
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_parameters": _LLAMA["rope_parameters"],
    },
    "Llama-3.3-70B": {
        **_LLAMA,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "tie_word_embeddings": False,
    },
    "Llama-3.3-70B-eagle3": {
        **_EAGLE3,
        "hidden_size": 8192,
        "intermediate_size": 28672,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "rope_parameters": _LLAMA["rope_parameters"],
    },
    "Qwen3-32B": {
        **_QWEN3,
        "hidden_size": 5120,
        "intermediate_size": 25600,
        "num_hidden_layers": 64,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "tie_word_embeddings": False,
    },
    "Qwen3-4B": {
        **_QWEN3,
        "hidden_size": 2560,
        "intermediate_size": 9728,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "tie_word_embeddings": True,
    },
    "Qwen3-1.7B": {
        **_QWEN3,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "tie_word_embeddings": True,
    },
    "Qwen3-32B-eagle3": {
        **_EAGLE3,
        "hidden_size": 5120,
        "intermediate_size": 25600,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 40960,
        "rope_parameters": _QWEN3["rope_parameters"],
    },
}


def _padded_tokenizer(source: Path, out: Path, vocab_size: int) -> None:
    """The source's tokenizer.json with never-produced tokens appended up to ``vocab_size`` ids."""
    tokenizer = json.loads((source / "tokenizer.json").read_text())
    vocab = tokenizer["model"]["vocab"]
    ids = {*vocab.values(), *(t["id"] for t in tokenizer.get("added_tokens", []))}
    size = max(ids) + 1
    if len(ids) != size or size > vocab_size:
        raise ConfigError(
            f"The tokenizer in {source} cannot be padded to {vocab_size} ids; run `specscope models prepare` again."
        )
    vocab.update({f"<|shape_pad_{i}|>": i for i in range(size, vocab_size)})
    (out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))


def build(name: str, tokenizer_dir: Path, directory: Path | None = None) -> Path:
    """Write the shape ``name``'s folder (config and padded tokenizer, no weights); returns its path."""
    if name not in SHAPES:
        raise ConfigError(f"No model shape '{name}'; choose one of: {', '.join(SHAPES)}.")
    tokenizer_dir = Path(tokenizer_dir)
    if not (tokenizer_dir / "tokenizer.json").is_file():
        raise ConfigError(
            f"No tokenizer.json in {tokenizer_dir}; run `specscope models prepare` first "
            "(the shapes borrow the demo model's tokenizer and chat template)."
        )
    config = SHAPES[name]

    def make(out: Path) -> None:
        out.mkdir(parents=True)
        (out / "config.json").write_text(json.dumps(config, indent=1))
        _padded_tokenizer(tokenizer_dir, out, config["vocab_size"])
        for file in TOKENIZER_FILES:
            if (tokenizer_dir / file).is_file():
                shutil.copy(tokenizer_dir / file, out / file)

    folder = (Path(directory) if directory else settings.models_dir()) / f"{PREFIX}{name}"
    models.build_folder(folder, make, {"shape": name, "weights": "none: serve with --load-format dummy"})
    return folder


def build_all(tokenizer_dir: Path, directory: Path | None = None) -> list[Path]:
    """Every shape's folder."""
    return [build(name, tokenizer_dir, directory) for name in SHAPES]
