"""The koan's own calls of a TODO, judged (plugin/contracts.py): an untraced TODO (`traced =
false`) called on plain values is called again on moved ones (`_replayed`), the answer's result
there logged by an author's run and kept in its profile; a traced TODO's program is read with
the weak types its call had, and what its own code bound that its contract forbids counts."""

from __future__ import annotations

import json
import types

import pytest

from jaxkoans.plugin import contracts, costs, fresh

KOAN = "answers/03/test_x.py::test_bubble"
UNTRACED = {"traced": False, "why": "returns a Python float from two ints"}


def bubble(stages, microbatches):  # the work
    return (stages - 1) / (microbatches + stages - 1)


def looked_up(stages, microbatches):  # right at the test's numbers only
    return {(8, 1): 7 / 8, (8, 3): 0.7}[(stages, microbatches)]


def _as_author(author: bool, tmp_path, monkeypatch) -> None:
    """An author's run logs the answer's profile to tmp_path/log.jsonl; a learner's is judged."""
    if author:
        monkeypatch.setenv(contracts.PROGRAMS_ENV, str(tmp_path / "log.jsonl"))
    else:
        monkeypatch.delenv(contracts.PROGRAMS_ENV, raising=False)


def _judged(name, function, koan, tmp_path, profiles, author, monkeypatch):
    """`koan` (given the module) run with `name` recorded as an untraced TODO, and judged: an
    author's run logs to tmp_path/log.jsonl, a learner's is held to `profiles`."""
    module = types.SimpleNamespace(**{name: function})
    _as_author(author, tmp_path, monkeypatch)
    with contracts.recording(module, {name: UNTRACED}) as records:
        koan(module)
    return contracts.check(records, KOAN, {name: profiles} if profiles else None)


def _profiled(tmp_path, todo: str, chapter: str = "03"):
    """The author's run logged in tmp_path/log.jsonl written as chapter `chapter`'s profiles:
    its entries, and the profiles of `todo`."""
    entries = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    folder = tmp_path / chapter
    folder.mkdir()
    costs.write(folder, entries)
    return entries, costs.profiles_for(folder, "test_x.py")[todo]


def _run(function, tmp_path, profiles=None, author=False, monkeypatch=None):
    def koan(module):
        for call in ((8, 1), (8, 3)):
            assert module.bubble(*call) == pytest.approx(bubble(*call))

    return _judged("bubble", function, koan, tmp_path, profiles, author, monkeypatch)


def test_an_untraced_todo_on_plain_values_is_held_to_the_answer_on_moved_ones(
    tmp_path, monkeypatch
):
    _run(bubble, tmp_path, author=True, monkeypatch=monkeypatch)
    entries = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(entries) == 2 and all(e["costs"]["ints"] for e in entries)  # counts one up
    chapter = tmp_path / "03"
    chapter.mkdir()
    costs.write(chapter, [e | {"koan": "answers/03/test_x.py::test_bubble"} for e in entries])
    profiles = costs.profiles_for(chapter, "test_x.py")["bubble"]
    assert _run(bubble, tmp_path, profiles, monkeypatch=monkeypatch) == []  # nothing "met"
    with pytest.raises(contracts.ContractBroken, match="inputs the test never showed"):
        _run(looked_up, tmp_path, profiles, monkeypatch=monkeypatch)


def warmup():  # returns what the koan calls: a schedule of the step
    return lambda step: min(step, 100) / 100.0


def warmup_looked_up():  # right at the steps the test asks only
    return lambda step: {10: 0.1, 50: 0.5, 100: 1.0}[step]


def _made(function, tmp_path, profiles=None, author=False, monkeypatch=None):
    def koan(module):
        lr = module.warmup()
        assert [lr(s) for s in (10, 50, 100)] == [0.1, 0.5, 1.0]

    return _judged("warmup", function, koan, tmp_path, profiles, author, monkeypatch)


def test_a_callable_an_untraced_todo_returns_is_called_again_on_moved_values(
    tmp_path, monkeypatch
):
    """A schedule, a step function, an optimizer's update: what an untraced TODO returns is
    called again as the koan called it, from the TODO's replayed result, on its values moved
    (red teams 7a–c: a returned function was never called on other inputs)."""
    _made(warmup, tmp_path, author=True, monkeypatch=monkeypatch)
    (entry,), profiles = _profiled(tmp_path, "warmup")
    assert entry["costs"]["ints"] and len(entry["costs"]["fresh"]["test_bubble"]) == 3  # each call
    assert _made(warmup, tmp_path, profiles, monkeypatch=monkeypatch) == []
    with pytest.raises(contracts.ContractBroken, match="inputs the test never showed"):
        _made(warmup_looked_up, tmp_path, profiles, monkeypatch=monkeypatch)
    assert not contracts._MADE  # the returned function's code is watched no longer


def test_closures_of_one_code_are_told_apart_by_their_cells(tmp_path, monkeypatch):
    """optax's chains share one code object: the koan's calls of another instance (an inner
    chain, another schedule) are not calls of the one the TODO returned (red team 9b)."""

    def ramp(scale):
        return lambda step: scale * step

    def make():
        return ramp(2.0)

    module = types.SimpleNamespace(make=make)
    with contracts.recording(module, {"make": UNTRACED}) as records:
        mine, other = module.make(), ramp(5.0)
        other(7), mine(3), other(9)
    ((signature, _),) = records[0].seen
    (function,) = records[0].returned[signature]
    assert records[0].made[id(function)] == [((3,), {})]


def test_a_jitted_function_a_todo_returns_is_called_again_on_values_of_its_traced_types():
    """jit calls the function it wraps only to trace it: the koan's call is kept as the
    types it was traced at, and values of those types are drawn to call it again."""
    import jax
    import jax.numpy as jnp

    def make_step():
        return jax.jit(lambda w, x: w - 0.1 * x)

    module = types.SimpleNamespace(make_step=make_step)
    with contracts.recording(module, {"make_step": UNTRACED}) as records:
        module.make_step()(jnp.ones(3), jnp.ones(3))
    ((signature, _),) = records[0].seen
    (function,) = records[0].returned[signature]
    ((args, kwargs),) = records[0].made[id(function)]
    assert all(isinstance(a, jax.ShapeDtypeStruct) and a.shape == (3,) for a in args)
    made = [records[0].made[id(function)]]
    again = contracts._remade(make_step, made, 1, fresh.SCALE, False)()
    assert len(again) == 1 and again[0].shape == (3,) and not jnp.allclose(again[0], 0.9)


def test_only_plain_values_are_called_again():
    import numpy as np

    assert fresh.values_only((8, 3, 0.5, None, (2, 4)), {"x": np.ones(3)})
    assert fresh.movable((8, 3, 0.5, None, (2, 4)), {"x": np.ones(3)})
    assert not fresh.values_only((print,), {})  # a function: the call may do anything again
    assert not fresh.values_only(("/tmp/checkpoint",), {})  # a path: I/O
    assert not fresh.values_only((object(),), {})
    assert fresh.values_only((), {}) and not fresh.movable((), {})  # its result may be moved
    assert not fresh.movable((True, None), {})  # a flag is no count


def test_a_spec_or_a_string_is_compared_exactly():
    from jax.sharding import PartitionSpec as P

    spec = fresh.fingerprint(P("data", None), 1)
    assert fresh.differs(fresh.fingerprint(P("data", None), 1), spec) == ""
    assert "another result" in fresh.differs(fresh.fingerprint(P(None, "data"), 1), spec)


def test_a_sparse_result_is_compared_as_the_matrix_it_stands_for():
    """The same matrix stored in another order is the same result (red team 6: a BCOO built
    by scipy.sparse.kron was refused against the answer's)."""
    import jax.numpy as jnp
    from jax.experimental import sparse

    dense = jnp.array([[0.0, 2.0], [3.0, 0.0]])
    stored = sparse.BCOO.fromdense(dense)
    flipped = sparse.BCOO((stored.data[::-1], stored.indices[::-1]), shape=stored.shape)
    assert fresh.differs(fresh.fingerprint(flipped, 1), fresh.fingerprint(stored, 1)) == ""
    other = sparse.BCOO.fromdense(dense.T)
    assert "another result" in fresh.differs(fresh.fingerprint(other, 1), fresh.fingerprint(stored, 1))


def test_a_mesh_moved_keeps_the_most_devices_that_still_split_its_arrays():
    """One device fewer where that splits the arrays (8 → 7 for 56 rows); else the most that do
    (64 rows: 4), so a device count written in meets a mesh the call can run on (red team 6b:
    `psum(loss) / 8` passed where 7 devices could not split the batch)."""
    import jax
    import jax.numpy as jnp

    mesh = jax.make_mesh((8,), ("data",))
    for rows, devices in ((56, 7), (64, 4)):
        x = jax.device_put(jnp.ones((rows, 2)), jax.NamedSharding(mesh, jax.P("data")))
        (moved_mesh, moved_x), _ = fresh.moved((mesh, x), {}, 3, ints=True)
        assert moved_mesh.shape["data"] == devices
        assert moved_x.sharding.mesh.shape["data"] == devices and moved_x.shape == (rows, 2)


def test_values_drawn_for_tracers_on_an_explicit_mesh_go_on_the_mesh_the_call_was_handed():
    """A TODO jitted with its Mesh static and its arrays typed on that Mesh's Explicit axes got
    unplaced values drawn, its shard_map refused them and no fresh case ran (06 `reduce_once`
    dividing by 8 devices written in passed): drawn values go on the Mesh among the arguments,
    so moving that Mesh moves them with it."""
    import jax
    import jax.numpy as jnp

    mesh = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))
    x = jax.device_put(jnp.ones((64, 2)), jax.NamedSharding(mesh, jax.P("data")))
    specs = []
    jax.jit(lambda m, v: specs.append(contracts._spec(v)) or v, static_argnums=0)(mesh, x)
    (same, drawn), _ = fresh.drawn((mesh, specs[0]), {}, 5)
    assert drawn.sharding.mesh == mesh and drawn.sharding.is_equivalent_to(x.sharding, 2)
    (smaller, moved), _ = fresh.moved((same, drawn), {}, 5, ints=True)
    assert moved.sharding.mesh is smaller and smaller.shape["data"] == 4


def test_the_judges_runs_happen_inside_the_mesh_the_koan_set(tmp_path, monkeypatch):
    """A TODO called inside `with jax.set_mesh(mesh)` naming a bare PartitionSpec raised in
    every fresh case, run after the koan left the block (03 `sum_of_products`, 06 `zero_step`,
    10 `explicit_init` had none): the judge's runs enter the mesh the call had."""
    import jax
    import jax.numpy as jnp

    n = jax.device_count()
    mesh = jax.make_mesh((n,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,))

    def spread(x):
        return jax.sharding.reshard(x * 2.0, jax.P("d"))

    module = types.SimpleNamespace(spread=spread)
    _as_author(True, tmp_path, monkeypatch)
    contract = {"spread": {"on_path": ["mul"]}}
    with contracts.recording(module, contract) as records, jax.set_mesh(mesh):
        module.spread(jnp.ones((2 * n, 3)))
    contracts.check(records, "answers/03/test_x.py::test_spread")
    (entry,) = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert isinstance(entry["costs"]["fresh"]["test_spread"], list)


def test_the_program_read_is_the_one_the_koans_call_ran(monkeypatch):
    """A weakly typed argument (a Python scalar through jit) is read as one, and what the TODO's
    own code bound that its contract forbids fails it even where a re-trace would not show it;
    a rule run inside a bind (an eager scan's while loop) is not the TODO's."""
    import jax
    import jax.numpy as jnp

    _as_author(False, None, monkeypatch)

    def step(u, h):  # dense work only when h comes in weakly typed
        if getattr(jax.typeof(h), "weak_type", False):
            return jnp.eye(u.shape[0]) @ u * h
        return u * h

    def cumulative(u):  # honest: one scan, run eagerly
        return jax.lax.scan(lambda c, x: (c + x, c + x), 0.0, u)[1]

    module = types.SimpleNamespace(step=step, cumulative=cumulative)
    watched = {"step": {"absent": ["dot_general"]}, "cumulative": {"absent": ["while"]}}
    u = jnp.arange(4.0)
    with contracts.recording(module, watched) as records:
        jax.jit(module.step)(u, 0.1)
        module.cumulative(u)
    with pytest.raises(contracts.ContractBroken, match="must not appear") as broken:
        contracts.check(records, "answers/01/test_x.py::test_step")
    assert broken.value.function == "step"
    assert contracts.check([r for r in records if r.name == "cumulative"], "k") == ["cumulative"]


def test_a_technique_that_makes_only_another_output_does_not_carry_this_one():
    """Liveness per output: the answer's technique makes both outputs; a TODO whose technique
    makes only the large one (a cache written and returned) while other work makes the small
    one carries nearly every element, yet none of the output that counts."""
    import jax
    import jax.numpy as jnp

    from jaxkoans.plugin import liveness

    def honest(x):
        s = jax.lax.cumsum(x)
        return jnp.sum(s * s), s

    def beside(x):
        s = jax.lax.cumsum(x)
        other = jnp.tril(jnp.ones((x.size, x.size))) @ x  # the same sums, by a matmul
        return jnp.sum(other * other), s

    x = jnp.linspace(0.5, 2.0, 64)
    cumsum = jax.make_jaxpr(jax.lax.cumsum)(x).eqns[0].primitive
    carried: dict = {}
    assert liveness.problems(honest, {"cumsum": cumsum}, (x,), {}, 3, carried=carried) == []
    assert carried[f"cumsum {liveness.EACH}"] == [1.0, 1.0]
    assert liveness.problems(beside, {"cumsum": cumsum}, (x,), {}, 3) == []  # no answer to hold
    (said,) = liveness.problems(beside, {"cumsum": cumsum}, (x,), {}, 3, answer=carried)
    assert "leaves output 0" in said


def test_the_grown_call_doubles_every_length_at_once():
    """A size written in for a short axis (a head dimension) meets another size only where
    every length grows, not the longest alone."""
    import jax.numpy as jnp

    def scores(q, k):  # the work: scaled by the head dimension
        return q @ k.T / jnp.sqrt(q.shape[-1])

    def four(q, k):  # right at the test's head dimension of 4 only
        return q @ k.T / 2.0

    q, k = jnp.ones((8, 4)), jnp.linspace(0.0, 1.0, 32).reshape(8, 4)
    assert fresh.lengths((q, k), {}) == [8, 4]
    longest = fresh.run(four, (q, k), {}, 1, length=8)
    assert fresh.differs(longest, fresh.run(scores, (q, k), {}, 1, length=8)) == ""
    every = fresh.run(scores, (q, k), {}, 1, length=[8, 4])
    assert "another result" in fresh.differs(fresh.run(four, (q, k), {}, 1, length=[8, 4]), every)
    assert fresh.doubled([8, 4])[1] == "every axis of length 8, 4 doubled at once"


def test_a_moved_call_hands_in_another_key_so_a_seed_written_in_shows():
    """Keys were kept as the test's (red team 7c: 10 `explicit_init` drawing from the tested
    seed passed): with the counts moved, each typed key is another, which the answer follows
    and a key written into the TODO does not."""
    import jax

    def draw(key, shape=(4,)):
        return jax.random.normal(key, shape)

    def written_in(key, shape=(4,)):
        return jax.random.normal(jax.random.key(0), shape)

    key = jax.random.key(0)
    assert fresh.differs(fresh.run(written_in, (key,), {}, 1), fresh.run(draw, (key,), {}, 1)) == ""
    assert fresh.differs(
        fresh.run(written_in, (key,), {}, 1, ints=True), fresh.run(draw, (key,), {}, 1, ints=True)
    )


def test_a_call_under_shard_map_and_a_jit_call_of_the_same_shapes_are_two_calls():
    """The jit call of a TODO kept no fresh case where a shard_map call of the same shapes came
    first (red team 7a, 03 `grouped_experts`): a call under named axes is its own signature."""
    import jax
    import jax.numpy as jnp

    def double(x):
        return 2.0 * x

    module = types.SimpleNamespace(double=double)
    mesh = jax.make_mesh((jax.device_count(),), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    block = jnp.ones((4, 3))
    with contracts.recording(module, {"double": {"on_path": ["mul"]}}) as records:
        spread = jnp.ones((4 * jax.device_count(), 3))
        jax.shard_map(module.double, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"))(spread)
        jax.jit(module.double)(block)
    (calls,) = records
    assert len(calls.seen) == 2 and "under [('i'" in calls.seen[0][0]


def test_a_smaller_mesh_keeps_the_calls_global_shapes_or_else_its_blocks():
    """03 `fsdp_loss` (a gathered weight against an unsplit batch) raised on the smaller mesh
    where each block kept its shape: the global shapes are kept first, each device's block
    grows; two operands split alike (a ring matmul) still run with their blocks kept."""
    import jax
    import jax.numpy as jnp

    from jaxkoans.plugin import meshes

    n = jax.device_count()
    mesh = jax.make_mesh((n,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

    def gathered(w_block, x):  # x is not split: it has every feature
        return x @ jax.lax.all_gather(w_block, "i", tiled=True)

    placed = []

    def koan(w_block, x):
        placed.append(meshes.placed((w_block, x), {}, {"i": n}, False))
        return gathered(w_block, x)

    specs = (jax.P("i"), jax.P())
    shard = jax.shard_map(koan, mesh=mesh, in_specs=specs, out_specs=jax.P("i"))
    jax.jit(shard)(jnp.ones((2 * n, 3)), jnp.ones((5 * n, 2 * n)))
    assert isinstance(meshes.run(gathered, placed[0], 1), list)
    with pytest.raises(TypeError):  # blocks kept: half the features against all of x's
        meshes.run(gathered, placed[0], 1, blocks=True)


def _bold(function, tmp_path, monkeypatch, profiles=None):
    import jax.numpy as jnp

    module = types.SimpleNamespace(act=function)
    _as_author(profiles is None, tmp_path, monkeypatch)
    with contracts.recording(module, {"act": {"on_path": ["mul"]}}) as records:
        x = jnp.linspace(-0.1, 0.1, 8)
        assert jnp.allclose(module.act(x), x * jnp.tanh(x), rtol=1e-3, atol=1e-7)
    return contracts.check(records, "answers/03/test_x.py::test_act", profiles)


def test_a_series_right_over_the_tests_range_meets_the_bold_case(tmp_path, monkeypatch):
    """x - x^3/3 for tanh is right to 1e-5 over the test's |x| <= 0.1, moved or scaled down;
    the bold case (every float 32 times larger, where the answer is finite and well
    conditioned) takes it past that range."""
    import jax
    import jax.numpy as jnp

    def answer():  # a new function each time: the koan's call traces it, so its binds are seen
        return jax.jit(lambda x: x * jnp.tanh(x))

    def series():
        return jax.jit(lambda x: x * (x - x**3 / 3))

    _bold(answer(), tmp_path, monkeypatch)
    (entry,) = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert isinstance(entry["costs"]["bold"]["test_act"]["print"], list)
    chapter = tmp_path / "03"
    chapter.mkdir()
    costs.write(chapter, [entry])
    profiles = {"act": costs.profiles_for(chapter, "test_x.py")["act"]}
    assert _bold(answer(), tmp_path, monkeypatch, profiles) == ["act"]
    with pytest.raises(contracts.ContractBroken, match="scaled up by 32"):
        _bold(series(), tmp_path, monkeypatch, profiles)


def test_a_custom_vjp_fwds_primal_inputs_are_moved_like_arrays():
    """Under symbolic zeros a custom_vjp's fwd is handed CustomVJPPrimal(value, perturbed): a
    leaf no fresh case reached, so tanh_layer_fwd's fresh, scaled and bold cases ran on its
    test's own values (red team 9a: a clamp fitted to them passed)."""
    import jax.numpy as jnp
    import numpy as np
    from jax.custom_derivatives import CustomVJPPrimal

    args, _ = fresh.opened((CustomVJPPrimal(jnp.ones(3), True),), {})
    assert isinstance(args[0], CustomVJPPrimal) and args[0].perturbed
    (moved,), _ = fresh.moved(args, {}, 7)
    assert moved.perturbed and not np.allclose(moved.value, 1.0)
    assert fresh.movable(args, {}) and len(fresh.floats(args, {})) == 1


def test_a_call_the_recorder_cannot_read_runs_as_it_would_have():
    """A dict keyed by devices cannot be flattened (they do not sort): its call is not recorded,
    and nothing the recorder does raises in the koan's own call (03 `stitch` failed so)."""

    class Key:  # unorderable, like jax's Device
        pass

    def gather(pieces):
        return sorted(pieces.values())

    module = types.SimpleNamespace(gather=gather)
    with contracts.recording(module, {"gather": UNTRACED}) as records:
        assert module.gather({Key(): 2.0, Key(): 1.0}) == [1.0, 2.0]
    assert records[0].seen == []


def test_a_replayed_call_can_rename_its_dict_keys_and_keep_its_signs():
    """An untraced TODO's replay may hand its callables dicts keyed by names the test never
    used (a mask keyed by the test's names meets others) and keep a non-negative array so (an
    optimizer's zero second moment moved below zero gives a NaN root)."""
    from collections import namedtuple

    import numpy as np

    from jaxkoans.plugin import fresh

    State = namedtuple("State", "count nu")
    call = ({"w": np.zeros(3), "b": [np.ones(2)]}, State(0, {"w": np.zeros(3)}))
    (grads, state), _ = fresh.moved(call, {"lr": 0.1}, 5, signs=True, names=True)
    assert sorted(grads) == [fresh.NAMED + "c", fresh.NAMED + "x"]  # each letter the next
    assert isinstance(state, State) and list(state.nu) == [fresh.NAMED + "x"]
    assert (np.asarray(state.nu[fresh.NAMED + "x"]) > 0).all()
    (_, kept), kwargs = fresh.moved(call, {"lr": 0.1}, 5)
    assert (np.asarray(kept.nu["w"]) < 0).any() and list(kwargs) == ["lr"]


def _adam():
    import optax

    return optax.adam(0.1)


def _adam_traced_too():  # another state layout, the same updates
    import optax

    return optax.chain(optax.adam(0.1), optax.trace(decay=0.0))


def _adam_twice_the_rate():  # another state layout, other updates
    import optax

    return optax.chain(optax.adam(0.2), optax.trace(decay=0.0))


def _optimize(function, tmp_path, profiles=None, author=False, monkeypatch=None):
    import jax.numpy as jnp

    def koan(module):
        tx = module.make()
        params = {"w": jnp.ones(3)}
        updates, _ = tx.update({"w": jnp.full(3, 0.5)}, tx.init(params), params)
        assert updates["w"].shape == (3,)

    return _judged("make", function, koan, tmp_path, profiles, author, monkeypatch)


def test_an_optimizer_of_another_state_layout_is_held_to_the_answers_updates(
    tmp_path, monkeypatch
):
    """An update of another state layout (an extra transform's state) is compared where it is
    shaped as its arguments: its updates (issue 54: it was not compared at all)."""
    _optimize(_adam, tmp_path, author=True, monkeypatch=monkeypatch)
    (entry,), profiles = _profiled(tmp_path, "make", "06")
    assert entry["costs"]["layout"]["test_bubble"] == 1  # the updates, shaped as the grads
    assert _optimize(_adam_traced_too, tmp_path, profiles, monkeypatch=monkeypatch) == []
    with pytest.raises(contracts.ContractBroken, match="inputs the test never showed"):
        _optimize(_adam_twice_the_rate, tmp_path, profiles, monkeypatch=monkeypatch)


def _by_rank(params):  # weight decay on the matrices, whatever they are called
    import jax

    return jax.tree.map(lambda x: x.ndim > 1, params)


def _adamw_by_rank():
    import optax

    return optax.adamw(1e-5, weight_decay=1e-2, mask=_by_rank)


def _adamw_by_rank_in_named_steps():  # honest: its state is keyed by names of its own
    import optax

    decay = optax.add_decayed_weights(1e-2, mask=_by_rank)
    return optax.named_chain(
        ("adam", optax.scale_by_adam()), ("decay", decay), ("rate", optax.scale(-1e-5))
    )


def _adamw_by_the_tests_names():  # right on the test's names only
    import optax

    return optax.adamw(1e-5, weight_decay=1e-2, mask=lambda p: {k: k == "kernel" for k in p})


def _adamw_by_a_part_of_the_names():  # right on names that hold the test's
    import optax

    return optax.adamw(1e-5, weight_decay=1e-2, mask=lambda p: {k: "kern" in k for k in p})


def _decayed(function, tmp_path, profiles=None, author=False, monkeypatch=None):
    import jax.numpy as jnp

    def koan(module):
        tx = module.make()
        params = {"kernel": jnp.ones((2, 3)), "bias": jnp.ones(3)}
        grads = {"kernel": jnp.full((2, 3), 0.5), "bias": jnp.full(3, -0.5)}
        state = tx.init(params)
        for _ in range(2):
            updates, state = tx.update(grads, state, params)
        assert updates["kernel"].shape == (2, 3)

    return _judged("make", function, koan, tmp_path, profiles, author, monkeypatch)


def test_a_small_output_is_compared_at_its_own_scale(tmp_path, monkeypatch):
    """An update at a learning rate of 1e-5 moves by 1e-7 where weight decay is left out: under
    the absolute floor of 1e-6, but far above what rounding moves it. The answer's replay keeps
    per output how far a NUDGE of its inputs moves it, and the floor is that (times 1,000), so a
    mask keyed by the test's names is refused on renamed keys (issue 54: stop 70 let it pass)."""
    _decayed(_adamw_by_rank, tmp_path, author=True, monkeypatch=monkeypatch)
    (entry,), profiles = _profiled(tmp_path, "make", "06")
    floors = entry["costs"]["floors"]["test_bubble"]
    updates = entry["costs"]["layout"]["test_bubble"]  # the leading outputs
    assert entry["costs"]["names"] and max(floors[:updates]) < 1e-7
    assert _decayed(_adamw_by_rank, tmp_path, profiles, monkeypatch=monkeypatch) == []
    # the names its own init gave its state are not renamed (red team 10b: KeyError 'adam')
    assert _decayed(_adamw_by_rank_in_named_steps, tmp_path, profiles, monkeypatch=monkeypatch) == []
    for shortcut in (_adamw_by_the_tests_names, _adamw_by_a_part_of_the_names):
        with pytest.raises(contracts.ContractBroken, match="inputs the test never showed"):
            _decayed(shortcut, tmp_path, profiles, monkeypatch=monkeypatch)
    for profile in profiles.values():  # the same profile with the absolute floor lets it through
        profile.pop("floors")
    assert _decayed(_adamw_by_the_tests_names, tmp_path, profiles, monkeypatch=monkeypatch) == []


def _gated(function, tmp_path, monkeypatch, profiles=None):
    """A koan that calls `function` per device under shard_map, on values between 1 and 2."""
    import jax
    import jax.numpy as jnp

    module = types.SimpleNamespace(gate=function)
    _as_author(profiles is None, tmp_path, monkeypatch)
    n = jax.device_count()
    mesh = jax.make_mesh((n,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))
    with contracts.recording(module, {"gate": {"on_path": ["psum_invariant"]}}) as records:
        x = 1.0 + jnp.arange(4.0 * n) / (4 * n)
        program = jax.shard_map(module.gate, mesh=mesh, in_specs=jax.P("i"), out_specs=jax.P("i"))
        assert jnp.allclose(jax.jit(program)(x), x * jax.nn.sigmoid(x).sum())
    return contracts.check(records, "answers/03/test_x.py::test_gate", profiles)


def test_a_trick_right_over_the_values_drawn_meets_them_drawn_smaller_and_larger(
    tmp_path, monkeypatch
):
    """Under shard_map a TODO's only fresh case was the smaller mesh, its values drawn at one
    size: a sigmoid clamped to where the test's and those values lie passed (red team 10a's
    floored MoE gate). The same program runs again on values drawn 1/32 and 32 times as
    large, where the answer is finite and well conditioned there."""
    import jax
    import jax.numpy as jnp

    def answer(x):
        return x * jax.lax.psum(jax.nn.sigmoid(x).sum(), "i")

    def clamped(x):  # right to 1e-6 for |x| < 4 only: 0.5 + x/4 - x^3/48 would not be; a clip is
        return x * jax.lax.psum(jnp.clip(jax.nn.sigmoid(x), 0.01, 0.99).sum(), "i")

    _gated(answer, tmp_path, monkeypatch)
    (entry,), profiles = _profiled(tmp_path, "gate")
    sized = entry["costs"]["mesh"]["test_gate"]["sized"]
    assert sorted(sized) == ["0.03125", "32"]
    assert _gated(answer, tmp_path, monkeypatch, {"gate": profiles}) == ["gate"]
    with pytest.raises(contracts.ContractBroken, match="drawn times 32"):
        _gated(clamped, tmp_path, monkeypatch, {"gate": profiles})


def _summing(function, tmp_path, profiles=None, author=False, monkeypatch=None):
    import jax.numpy as jnp

    def koan(module):
        total = module.make()
        xs = jnp.linspace(0.5, 1.0, 5)
        assert jnp.allclose(total(xs), (xs**2).sum())

    return _judged("make", function, koan, tmp_path, profiles, author, monkeypatch)


def _scanned_sum():
    import jax

    def total(xs):
        return jax.lax.scan(lambda c, x: (c + x * x, None), 0.0, xs)[0]

    return jax.jit(total)


def _summed():  # honest: the same result by another route
    import jax

    return jax.jit(lambda xs: xs @ xs)


def _capped_at_the_tests_length():  # red team 11a: steps capped at the longest the koan runs
    import jax

    def total(xs):
        return jax.lax.scan(lambda c, x: (c + x * x, None), 0.0, xs[:5])[0]

    return jax.jit(total)


def test_a_returned_callable_is_also_called_on_longer_arrays(tmp_path, monkeypatch):
    """A callable an untraced TODO returns is also called with its arrays grown: a cap at the
    test's length (make_train_steps scanning at most the 19 steps the koan runs) is refused."""
    _summing(_scanned_sum, tmp_path, author=True, monkeypatch=monkeypatch)
    (entry,), profiles = _profiled(tmp_path, "make")
    assert entry["costs"]["grown"]["test_bubble"]["length"] == 5
    assert _summing(_summed, tmp_path, profiles, monkeypatch=monkeypatch) == []
    with pytest.raises(contracts.ContractBroken, match="on a larger input the test never showed"):
        _summing(_capped_at_the_tests_length, tmp_path, profiles, monkeypatch=monkeypatch)
