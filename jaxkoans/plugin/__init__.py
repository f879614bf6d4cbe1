"""The pytest plugin of the course (`jaxkoans.plugin.hooks.hooks`): JAX per chapter, readable failures, the record."""
