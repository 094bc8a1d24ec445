"""report.html (html.py), until it joins the other renderers in zqbench.outputs."""
