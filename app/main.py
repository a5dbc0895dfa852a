"""SpecScope dashboard: navigation only. Run with `streamlit run app/main.py`."""

import streamlit as st

st.set_page_config(page_title="SpecScope", page_icon="🔭", layout="wide")

pages = [
    st.Page("views/live.py", title="Live", icon="⚡", url_path="live"),
    st.Page("views/servers.py", title="Servers", icon="🖥️", url_path="servers"),
    st.Page("views/runs.py", title="Prompt sets & runs", icon="🏁", url_path="runs"),
    st.Page("views/explorer.py", title="Explorer", icon="📈", url_path="explorer", default=True),
    st.Page("views/theory.py", title="Theory", icon="📐", url_path="theory"),
]
st.navigation(pages).run()
