"""Streamlit helpers shared by the pages (the only place besides pages that imports streamlit)."""
