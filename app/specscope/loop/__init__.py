"""Sweeps run in order to advise: the deploy loop (``deploy_run``: measure the step cost, predict
(``deploy_plan``), verify, answer (``deploy_outcome``)) and the step-cost calibration sweep
(``calibration_sweep``). It sits above ``sweep`` (what it runs) and ``advice`` (what reads the rows), which
never import each other's way up."""
