"""The QMF front end: the gateway as a QMF agent on an AMQP broker (Apache Qpid's qpidd), so that programs written
for MRG Grid's QMF interfaces (``com.redhat.grid`` and the 2009 ``mrg.grid`` prototype) run unchanged against it.

Modules: ``settings`` (the ``[qmf]`` section), ``wire`` (QMFv1's binary schema answer, the one binary message
``qmf.console`` still uses), ``schema`` (the classes the agent publishes), ``ads`` (the two eras' job-ad encodings),
``methods`` (the methods, on the core's services), ``agent`` (the QMFv2 conversation), ``link`` (the broker
connection: qpid-proton's container in a thread of its own).
"""
