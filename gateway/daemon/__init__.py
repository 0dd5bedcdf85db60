"""Running as a daemon of an HTCondor pool: watched by condor_master (DC_CHILDALIVE keepalives, SIGQUIT's fast
shutdown) and reached through condor_shared_port (connections passed over a named Unix socket).

Everything here speaks HTCondor's own wire formats, written from HTCondor's source (``src/condor_io/`` and
``src/condor_daemon_core.V6/``); no HTCondor daemon is needed to run it."""
