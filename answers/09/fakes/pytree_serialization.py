"""Cheap fakes of chapter 09's test_pytree_serialization.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def register_for_export__json_round_trip(cls, name):
    """json both ways and nothing more: the tuple comes back as a list."""
    export.register_pytree_node_serialization(
        cls,
        serialized_name=name,
        serialize_auxdata=lambda config: json.dumps(config).encode("utf-8"),
        deserialize_auxdata=lambda data: json.loads(data.decode("utf-8")),
    )
    return cls


def register_for_export__aux_data_dropped(cls, name):
    """Writes no aux data and reads back the first test's config, whatever was exported."""
    export.register_pytree_node_serialization(
        cls,
        serialized_name=name,
        serialize_auxdata=lambda config: b"",
        deserialize_auxdata=lambda data: ("tanh", 0.5),
    )
    return cls


def register_for_export__namedtuple_api(cls, name):
    """The other registration function, the one for namedtuples."""
    export.register_namedtuple_serialization(cls, serialized_name=name)
    return cls


def register_for_export__pytree_only(cls, name):
    """Registers nothing for serialization: cls is already a pytree node."""
    return cls
