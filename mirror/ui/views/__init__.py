"""The UI's pages, one module per page kind; each exports ``routes`` (Starlette routes)."""
