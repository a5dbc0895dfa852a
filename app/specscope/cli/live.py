"""``specscope stream`` (stream servers side by side, print each engine step's provenance) and
``specscope replay`` (print a saved recording)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from specscope import formats, live
from specscope.client.stream import GenerationRequest
from specscope.errors import ConfigError

__all__ = ["register"]


def register(subparsers) -> None:
    """Add ``specscope stream`` and ``specscope replay``."""
    stream = subparsers.add_parser(
        "stream",
        help="stream a prompt to 2-6 servers and show token provenance",
        description="Each SERVER is 'label=URL' or a URL. Methods come from --config or the server's /metrics.",
    )
    stream.add_argument("servers", nargs="+", metavar="SERVER")
    stream.add_argument("--prompt", required=True)
    stream.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="LABEL=JSON",
        help="the server's --speculative-config (ngram settings rebuild rejected tokens)",
    )
    stream.add_argument("--max-tokens", type=int, default=128)
    stream.add_argument("--temperature", type=float, default=0.0)
    stream.add_argument("--chat", action="store_true", help="use /v1/chat/completions")
    stream.add_argument(
        "--response-format",
        metavar="JSON",
        help="the answer's format: a JSON schema, regex or choice list, e.g. "
        '\'{"type": "choice", "choice": ["yes", "no"]}\'; each pane says whether it is valid',
    )
    stream.add_argument(
        "--mode",
        choices=live.MODES,
        default=None,
        help="race or fair replay (default: fair where the servers share CPU cores or a GPU, or "
        "where nothing says they do not: attached or unknown servers)",
    )
    stream.add_argument("--save", action="store_true", help="save a recording under the SpecScope home")
    stream.add_argument("--json", action="store_true", help="print JSON instead of text")
    stream.set_defaults(func=_stream)
    replay = subparsers.add_parser("replay", help="print a recording saved by the Live page or `stream --save`")
    replay.add_argument("file", type=Path)
    replay.add_argument("--json", action="store_true")
    replay.set_defaults(func=_replay)


def _specs(args) -> list[live.PaneSpec]:
    configs = {}
    for item in args.config:
        label, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(f"--config {item!r} needs the form LABEL=JSON.")
        try:
            configs[label] = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"--config for {label} is not valid JSON ({exc}).") from exc
    lines = []
    for number, server in enumerate(args.servers, start=1):
        label, sep, url = server.partition("=")
        if not sep:
            label, url = f"server{number}", server
        config = configs.pop(label, None)
        lines.append(f"{label} {url} {json.dumps(config) if config else ''}")
    if configs:
        raise ConfigError(f"--config names unknown servers: {', '.join(configs)}.")
    return live.parse_server_lines("\n".join(lines))


def _response_format(text: str | None) -> str | None:
    if not text:
        return None
    try:
        return json.dumps(formats.parse(text).as_record())
    except ValueError as exc:
        raise ConfigError(f"--response-format {exc}.") from None


def _stream(args) -> int:
    request = GenerationRequest(
        prompt=args.prompt,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        chat=args.chat,
        response_format=_response_format(args.response_format),
    )
    specs = _specs(args)
    shared = live.sharing(specs)
    session = live.LiveSession.create(specs, request, args.mode or "fair", shared=tuple(shared))
    for label, what in shared.items():
        print(
            f"{label} shares {what} with another pane: fair replay, one server at a time"
            if session.mode == "fair"
            else f"{label} shares {what} with another pane: a race measures contention"
        )
    session.start()
    session.wait()
    session.skip_replay()  # the whole recording, not a playback moment
    _print(session, args.json)
    if args.save:
        print(f"saved {session.save()}")
    return 1 if any(p.error for p in session.panes) else 0


def _replay(args) -> int:
    session = live.load_recording(args.file)
    session.skip_replay()  # the whole recording, not a playback moment
    _print(session, args.json)
    return 0


def _print(session: live.LiveSession, as_json: bool) -> None:
    views = session.views(now=float("inf"))
    if as_json:
        print(json.dumps([_view_dict(v) for v in views], indent=1))
        return
    for view in views:
        m = view.metrics
        print(
            f"== {view.spec.label} ({view.spec.method}) labels: {view.provenance.source}"
            f"{' (estimated)' if view.provenance.estimated else ''}"
        )
        if view.error:
            print(f"   error: {view.error}")
        for step in view.provenance.steps:
            tokens = [t for t in view.provenance.tokens if t.step == step.index]
            shown = " ".join(f"{t.kind}:{t.text!r}" for t in tokens)
            rejected = " ".join(repr(view.token_texts.get(i, f"<{i}>")) for i in step.rejected_ids)
            drafted = "?" if step.drafted is None else step.drafted
            print(
                f"   step {step.index:>4} drafted {drafted} accepted {step.accepted}  {shown}"
                + (f"  rejected: {rejected}" if rejected else "")
            )
        print(
            f"   tokens {m.tokens}  ttft {_fmt(m.ttft_ms)} ms  tpot {_fmt(m.tpot_ms)} ms  itl {_fmt(m.itl_ms)} ms  "
            f"tok/s {_fmt(m.tokens_per_s)}  AL {_fmt(m.acceptance_length, 2)}  "
            f"acceptance {_fmt(m.acceptance_rate, 3)}"
            f"  speedup {_fmt(m.speedup, 2)}  lossless {view.lossless_note or view.lossless}"
            + (f" (first divergence at token {view.divergence})" if view.divergence is not None else "")
            + (
                ""
                if view.valid is None
                else f"  valid {view.valid}" + (f" ({view.invalid_reason})" if view.invalid_reason else "")
            )
        )
        for note in view.provenance.notes:
            print(f"   note: {note}")


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _view_dict(view: live.PaneView) -> dict:
    return {
        "label": view.spec.label,
        "method": view.spec.method,
        "source": view.provenance.source,
        "estimated": view.provenance.estimated,
        "error": view.error,
        "lossless": view.lossless,
        "lossless_note": view.lossless_note,
        "divergence": view.divergence,
        "valid": view.valid,
        "invalid_reason": view.invalid_reason,
        "metrics": asdict(view.metrics),
        "notes": view.provenance.notes,
        "steps": [
            {
                **asdict(s),
                "tokens": [t.text for t in view.provenance.tokens if t.step == s.index],
                "rejected_texts": [view.token_texts.get(i) for i in s.rejected_ids],
            }
            for s in view.provenance.steps
        ],
    }
