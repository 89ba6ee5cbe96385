"""Build (compile contracts to artifacts) and deploy (contracts to a chain, address books)."""
