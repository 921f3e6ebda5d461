"""NeuRules REST service: routers (HTTP edge) over services (domain) over tables; see docs/architecture.md.

`app` never imports `worker`: the composition root `worker.service` wires Celery, the reaper and the
embedded worker into `app.main.create_app`.
"""
