"""Plain-Python build and deploy rendering, git and registry clients; no Django here."""
