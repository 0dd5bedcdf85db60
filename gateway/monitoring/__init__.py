"""What an operator's monitoring reads of a running gateway: Prometheus metrics (``/metrics``), liveness
(``/healthz``) and readiness (``/readyz``), served on the gateway's own port to the hosts in ``allow_read``.

Counting costs the operations nothing: requests and job transitions are counted from the log events the gateway
already emits (:mod:`.events`), and the queue's figures are read from the backend when Prometheus scrapes
(:mod:`.figures`), never kept up to date on the hot path.
"""
