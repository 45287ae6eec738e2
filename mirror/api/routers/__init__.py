"""The routers of ``/api/v1``, one per area of lakeFS's API."""
