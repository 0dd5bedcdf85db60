#!/usr/bin/env python
# Declares QMF's two exchanges on a broker that runs without management (qpidd -m no), over AMQP 0-10 with
# qpid-python: the agent's receivers are refused until they exist.  Usage: declare_exchanges.py PORT
import sys

from qpid.connection import Connection
from qpid.util import connect

connection = Connection(sock=connect("127.0.0.1", int(sys.argv[1])))
connection.start()
session = connection.session("declare")
session.exchange_declare(exchange="qmf.default.direct", type="direct")
session.exchange_declare(exchange="qmf.default.topic", type="topic")
session.close()
connection.close()
