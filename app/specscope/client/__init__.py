"""Talking to a vLLM server: health, streams, /metrics, sleep mode, the load generator, prompt sets and warm-up."""
