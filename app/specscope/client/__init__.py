"""Talking to a vLLM server: health, streams, /metrics, sleep mode, the load generator and warm-up."""
