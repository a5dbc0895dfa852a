"""vLLM and what it serves: the method catalog, installed vLLMs, models, presets, K schedules, where a figure
was measured and the physical ceilings."""
