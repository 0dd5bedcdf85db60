"""Who a caller is: the transport's evidence turned into a :class:`gateway.core.auth.Caller`.

- :mod:`.tls` builds the SSL port's TLS context from HTCondor's ``soap_ssl_*`` knobs and names a client
  certificate's subject as OpenSSL's one-line form, the string HTCondor matched;
- :mod:`.mapfile` reads HTCondor's certificate map file, which turns that subject into a user;
- :mod:`.passwords` reads the password file (bcrypt hashes) that HTTP Basic over TLS is checked against;
- :mod:`.peers` finds the local user owning a client's socket on this machine (netlink ``sock_diag`` for TCP,
  ``SO_PEERCRED`` for the local Unix-domain socket);
- :mod:`.bearer` checks ``Authorization: Bearer`` tokens over TLS: HTCondor IDTOKENs signed with the gateway's keys
  (:mod:`.idtokens`) and SciTokens of trusted issuers (:mod:`.scitoken`), their ``condor:/`` scopes bounding the
  core's permissions (:mod:`.scopes`); :mod:`.tokentool` is ``birdbath token create``;
- :mod:`.callers` decides, per connection and request, which of these identifies the caller, or refuses it.
"""
