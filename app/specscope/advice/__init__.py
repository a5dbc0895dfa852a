"""What to deploy: acceptance fits, published curves, the step-cost model, the advisor, the deploy answer and its
closed loop."""
