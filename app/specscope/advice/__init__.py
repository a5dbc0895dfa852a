"""What to deploy, read from results: acceptance fits, published curves, the step-cost model, the advisor and
the deploy answer. It runs nothing: the sweeps that advise live in ``specscope.loop``."""
