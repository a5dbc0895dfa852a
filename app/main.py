"""SpecScope dashboard: navigation only. Run with `streamlit run app/main.py`."""

import streamlit as st

st.set_page_config(page_title="SpecScope", page_icon="🔭", layout="wide")

pages = [
    st.Page("pages/explorer.py", title="Explorer", icon="📈", url_path="explorer", default=True),
]
st.navigation(pages).run()
