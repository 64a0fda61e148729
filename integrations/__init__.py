"""Framework integrations: ``tripwire.integrations.<framework>`` (each an optional extra)."""
