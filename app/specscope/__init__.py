"""SpecScope: see and measure speculative decoding on vLLM.

The library behind the dashboard and the ``specscope`` command. It never imports
Streamlit; every capability is callable from the CLI and from tests.
"""

__version__ = "0.1.0"
