"""Connection security of the client: ``security.protocol``, TLS (:mod:`.ssl_factory`) and SASL
(:mod:`.sasl_client`, :mod:`.sasl_authenticator`), set up per connection by the ``NetworkClient``
from the settings :class:`.security_config.ClientSecurity` checks."""
