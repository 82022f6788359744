"""netd's HTTP service (FastAPI): /metrics, health, and the v1 JSON API."""
