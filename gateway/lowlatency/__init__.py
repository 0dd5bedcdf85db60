"""MRG Grid's low-latency job submission (carod) over AMQP 0-9-1: a job is a message on a work queue, its ClassAd in
the application headers, and the replies go to its reply_to (docs: README "Low-latency jobs over AMQP").

The front end speaks AMQP and nothing else: :mod:`.codec` turns a message into job attributes and a job ad into reply
headers, :mod:`.archive` unpacks input zips and packs results, :mod:`.broker` keeps the connection to RabbitMQ, and
:mod:`.service` turns deliveries into jobs through the core's submission service and follows them to their replies.
"""
