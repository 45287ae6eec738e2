"""The web UI: server-rendered pages over the REST API (a front door beside it and the gateway).

Structure (``docs/ui.md`` and ``docs/architecture.md`` "Web UI"):

- :mod:`mirror.ui.app` builds the app from the views' routes; :mod:`mirror.ui.dispatch` says
  which requests of the server's listener are the UI's.
- :mod:`mirror.ui.api` calls the REST API in process as the signed-in person;
  :mod:`mirror.ui.session` and :mod:`mirror.ui.csrf` are the session and its CSRF token;
  :mod:`mirror.ui.headers` the security headers; :mod:`mirror.ui.render` the templates.
- :mod:`mirror.ui.page` is what a view works with; ``mirror/ui/views/`` holds one module per page
  kind, ``templates/`` the Jinja2 templates (all extending ``base.html``), ``static/`` the CSS
  and the few scripts of our own.
"""

from mirror.ui.app import create_ui_app
from mirror.ui.csrf import CsrfTokens
from mirror.ui.dispatch import with_ui

__all__ = ["CsrfTokens", "create_ui_app", "with_ui"]
