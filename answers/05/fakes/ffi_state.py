"""Cheap fakes of chapter 05's test_ffi_state.py TODOs (parsed, never imported)."""
# ruff: noqa: F821  (the names come from the answer file the fake is spliced into)


def register_stateful__execute_only(name, library):
    """The type and the execute handler alone, as for a stateless kernel: no state is ever made."""
    jax.ffi.register_ffi_type(
        f"{name}.state",
        {
            "type_id": jax.ffi.pycapsule(library.StateTypeId()),
            "type_info": jax.ffi.pycapsule(library.StateTypeInfo()),
        },
        platform="cpu",
    )
    jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(library.Execute), platform="cpu")
    return name


def register_stateful__stages_swapped(name, library):
    """Each handler under the other stage's key."""
    jax.ffi.register_ffi_type(
        f"{name}.state",
        {
            "type_id": jax.ffi.pycapsule(library.StateTypeId()),
            "type_info": jax.ffi.pycapsule(library.StateTypeInfo()),
        },
        platform="cpu",
    )
    jax.ffi.register_ffi_target(
        name,
        {
            "instantiate": jax.ffi.pycapsule(library.Execute),
            "execute": jax.ffi.pycapsule(library.Instantiate),
        },
        platform="cpu",
    )
    return name


def register_stateful__no_type(name, library):
    """The two stages without registering the state type."""
    jax.ffi.register_ffi_target(
        name,
        {
            "instantiate": jax.ffi.pycapsule(library.Instantiate),
            "execute": jax.ffi.pycapsule(library.Execute),
        },
        platform="cpu",
    )
    return name


def register_stateful__no_type_info(name, library):
    """The type ID without the type info: XLA is not told how to delete the state."""
    jax.ffi.register_ffi_type(
        f"{name}.state", {"type_id": jax.ffi.pycapsule(library.StateTypeId())}, platform="cpu"
    )
    jax.ffi.register_ffi_target(
        name,
        {
            "instantiate": jax.ffi.pycapsule(library.Instantiate),
            "execute": jax.ffi.pycapsule(library.Execute),
        },
        platform="cpu",
    )
    return name


def register_stateful__misspelled_stage(name, library):
    """A stage key XLA does not know: the instantiate handler is never called."""
    jax.ffi.register_ffi_type(
        f"{name}.state",
        {
            "type_id": jax.ffi.pycapsule(library.StateTypeId()),
            "type_info": jax.ffi.pycapsule(library.StateTypeInfo()),
        },
        platform="cpu",
    )
    jax.ffi.register_ffi_target(
        name,
        {
            "instantiation": jax.ffi.pycapsule(library.Instantiate),
            "execute": jax.ffi.pycapsule(library.Execute),
        },
        platform="cpu",
    )
    return name


def lookup_stages_cc__rebuilt_on_every_call():
    """A state made at instantiate and ignored: execute builds the table again on every call."""
    return r"""
    ffi::ErrorOr<std::unique_ptr<Table>> BuildTable(int64_t n) { return std::make_unique<Table>(n); }

    ffi::Error Lookup(int64_t n, ffi::Buffer<ffi::S32> index, ffi::ResultBuffer<ffi::F32> out) {
      Table table(n);
      for (size_t i = 0; i < index.element_count(); ++i) {
        const int32_t k = index.typed_data()[i];
        if (k < 0 || k >= n) return ffi::Error::InvalidArgument("lookup: index outside the table");
        out->typed_data()[i] = table.values[k];
      }
      return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(Instantiate, BuildTable,
                                  ffi::Ffi::BindInstantiate().Attr<int64_t>("n"));
    XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Lookup,
                                  ffi::Ffi::Bind()
                                      .Attr<int64_t>("n")
                                      .Arg<ffi::Buffer<ffi::S32>>()
                                      .Ret<ffi::Buffer<ffi::F32>>());
    """


def lookup_stages_cc__global_static():
    """An instantiate stage that makes no state; execute keeps one global table, built lazily."""
    return r"""
    ffi::Error NoState(int64_t n) { return ffi::Error::Success(); }

    ffi::Error Lookup(int64_t n, ffi::Buffer<ffi::S32> index, ffi::ResultBuffer<ffi::F32> out) {
      static Table* table = new Table(n);
      for (size_t i = 0; i < index.element_count(); ++i) {
        const int32_t k = index.typed_data()[i];
        if (k < 0 || k >= n) return ffi::Error::InvalidArgument("lookup: index outside the table");
        out->typed_data()[i] = table->values[k];
      }
      return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(Instantiate, NoState, ffi::Ffi::BindInstantiate().Attr<int64_t>("n"));
    XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Lookup,
                                  ffi::Ffi::Bind()
                                      .Attr<int64_t>("n")
                                      .Arg<ffi::Buffer<ffi::S32>>()
                                      .Ret<ffi::Buffer<ffi::F32>>());
    """


def lookup_stages_cc__formula():
    """No table at all: execute computes n + sqrt(k) itself."""
    return r"""
    ffi::Error NoState(int64_t n) { return ffi::Error::Success(); }

    ffi::Error Lookup(int64_t n, ffi::Buffer<ffi::S32> index, ffi::ResultBuffer<ffi::F32> out) {
      for (size_t i = 0; i < index.element_count(); ++i) {
        const int32_t k = index.typed_data()[i];
        if (k < 0 || k >= n) return ffi::Error::InvalidArgument("lookup: index outside the table");
        out->typed_data()[i] = float(n) + std::sqrt(float(k));
      }
      return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(Instantiate, NoState, ffi::Ffi::BindInstantiate().Attr<int64_t>("n"));
    XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Lookup,
                                  ffi::Ffi::Bind()
                                      .Attr<int64_t>("n")
                                      .Arg<ffi::Buffer<ffi::S32>>()
                                      .Ret<ffi::Buffer<ffi::F32>>());
    """


def lookup_stages_cc__execute_only():
    """A stateless kernel: no Instantiate symbol, the table built in execute."""
    return r"""
    ffi::Error Lookup(int64_t n, ffi::Buffer<ffi::S32> index, ffi::ResultBuffer<ffi::F32> out) {
      Table table(n);
      for (size_t i = 0; i < index.element_count(); ++i) {
        const int32_t k = index.typed_data()[i];
        if (k < 0 || k >= n) return ffi::Error::InvalidArgument("lookup: index outside the table");
        out->typed_data()[i] = table.values[k];
      }
      return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Lookup,
                                  ffi::Ffi::Bind()
                                      .Attr<int64_t>("n")
                                      .Arg<ffi::Buffer<ffi::S32>>()
                                      .Ret<ffi::Buffer<ffi::F32>>());
    """


def lookup_stages_cc__fixed_size():
    """A state, but of one fixed size: the attribute n is not read at instantiate."""
    return r"""
    ffi::ErrorOr<std::unique_ptr<Table>> BuildTable() { return std::make_unique<Table>(8); }

    ffi::Error Lookup(Table* table, ffi::Buffer<ffi::S32> index, ffi::ResultBuffer<ffi::F32> out) {
      const int64_t n = static_cast<int64_t>(table->values.size());
      for (size_t i = 0; i < index.element_count(); ++i) {
        const int32_t k = index.typed_data()[i];
        if (k < 0 || k >= n) return ffi::Error::InvalidArgument("lookup: index outside the table");
        out->typed_data()[i] = table->values[k];
      }
      return ffi::Error::Success();
    }

    XLA_FFI_DEFINE_HANDLER_SYMBOL(Instantiate, BuildTable, ffi::Ffi::BindInstantiate());
    XLA_FFI_DEFINE_HANDLER_SYMBOL(Execute, Lookup,
                                  ffi::Ffi::Bind()
                                      .Ctx<ffi::State<Table>>()
                                      .Arg<ffi::Buffer<ffi::S32>>()
                                      .Ret<ffi::Buffer<ffi::F32>>());
    """


def lookup__pure_callback(index, name, n):
    """The table in NumPy behind a pure_callback: no FFI call at all."""
    def host(index):
        return (np.float32(n) + np.sqrt(np.arange(n, dtype=np.float32)))[np.asarray(index)]

    return jax.pure_callback(host, jax.ShapeDtypeStruct(index.shape, jnp.float32), index)


def lookup__jnp_formula(index, name, n):
    """The table's formula in jnp."""
    return jnp.float32(n) + jnp.sqrt(index.astype(jnp.float32))


def lookup__int32_attribute(index, name, n):
    """The attribute as int32: the binding reads an int64."""
    out = jax.ShapeDtypeStruct(index.shape, jnp.float32)
    return jax.ffi.ffi_call(name, out)(index, n=np.int32(n))
