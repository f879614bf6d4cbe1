"""Liveness (plugin/liveness.py) by resizing each use of the technique: where every use of the
answer's carries the result when its value's sizes change (signs, order, zeros, infs and NaNs
kept), a TODO's use that counts only through such a property, or that a computed where selects
away, fails; and a fresh case (plugin/fresh.py) moves inputs that hold inf or NaN."""

from __future__ import annotations

import warnings

import pytest


def _cumsum():
    import jax
    import jax.numpy as jnp

    return jax.make_jaxpr(jax.lax.cumsum)(jnp.ones(3)).eqns[0].primitive


def _honest(x):
    import jax

    s = jax.lax.cumsum(x)
    return s, jax.lax.cumsum(x) * s


def _sign_only(x):  # the second use's sign alone, its sizes taken from the first use
    import jax
    import jax.numpy as jnp

    s = jax.lax.cumsum(x)
    return s, jnp.sign(jax.lax.cumsum(x)) * jnp.abs(s) * s


def _selected_away(x):  # the technique selected away unless NaN; another use redoes the work
    import jax
    import jax.numpy as jnp

    s = jax.lax.cumsum(x)
    steps = jnp.diff(jnp.tril(jnp.ones((x.size, x.size))) @ x, prepend=0.0)
    done = jax.lax.cumsum(jnp.where(jnp.isnan(s), s, steps))
    return done, done * done


def _normalized(x):  # honest: each element's size counts, even over the sum
    import jax
    import jax.numpy as jnp

    s = jax.lax.cumsum(x)
    return s, jax.lax.cumsum(x) * s / jnp.sum(s)


X = (0.5, 2.0, 16)


def _profile(function) -> dict:
    import jax.numpy as jnp

    from jaxkoans.plugin import liveness

    carried: dict = {}
    x = jnp.linspace(*X)
    assert liveness.problems(function, {"cumsum": _cumsum()}, (x,), {}, 3, carried=carried) == []
    return carried


def _judged(function, answer: dict | None) -> list[str]:
    import jax.numpy as jnp

    from jaxkoans.plugin import liveness

    return liveness.problems(function, {"cumsum": _cumsum()}, (jnp.linspace(*X),), {}, 3, answer)


def test_the_answer_profile_counts_the_uses_that_change_nothing_resized():
    from jaxkoans.plugin import liveness

    assert _profile(_honest)[f"cumsum {liveness.IDLE}"] == 0
    assert _profile(_sign_only)[f"cumsum {liveness.IDLE}"] == 1


@pytest.mark.parametrize("shortcut", [_sign_only, _selected_away])
def test_a_use_that_counts_only_through_a_kept_property_fails(shortcut):
    """Both carry every element of the result under the shift-and-scale perturbation (another
    use of the same technique makes it), so only each use resized tells them from the
    answer."""
    answer = _profile(_honest)
    (said,) = _judged(shortcut, answer)
    assert "resizing what use" in said and "signs, order, zeros and NaNs kept" in said


def test_honest_routes_pass_and_no_profile_holds_nothing():
    from jaxkoans.plugin import liveness

    answer = _profile(_honest)
    assert _judged(_normalized, answer) == []
    assert _judged(_sign_only, None) == []  # no answer's profile: nothing to hold to
    loose = answer | {f"cumsum {liveness.IDLE}": 1}  # the answer's own has such a use
    assert _judged(_sign_only, loose) == []


def test_resized_keeps_signs_order_zeros_infs_and_nans_and_changes_sizes():
    import jax.numpy as jnp
    import numpy as np

    from jaxkoans.plugin import liveness

    x = jnp.array([-3.0, -0.5, 0.0, 0.25, 1.0, 4.0, jnp.inf, -jnp.inf, jnp.nan])
    got = np.asarray(liveness._resized(x))
    np.testing.assert_array_equal(np.sign(got), np.sign(np.asarray(x)))
    finite = np.isfinite(np.asarray(x))
    assert np.all(np.diff(got[:6]) > 0) and np.isnan(got[-1]) and not finite[6:8].any()
    assert np.isinf(got[6:8]).all() and got[2] == 0.0
    ratios = got[:6][np.asarray(x)[:6] != 0] / np.asarray(x)[:6][np.asarray(x)[:6] != 0]
    assert np.all(ratios > 1.0) and np.ptp(ratios) > 0.1  # not one common scaling
    flags = jnp.array([True, False])
    assert np.array_equal(np.asarray(liveness._resized(flags)), [False, True])


def test_a_fresh_case_moves_the_finite_entries_of_an_input_that_holds_inf():
    """A padded batch's losses hold inf: moving them must not warn (a learner's run treats
    the warning as an error and then ran no fresh case and no liveness at all)."""
    import jax.numpy as jnp
    import numpy as np

    from jaxkoans.plugin import fresh

    losses = jnp.array([[0.5, jnp.inf], [jnp.nan, 2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ((moved,), _) = fresh.moved((losses,), {}, 7)
    moved = np.asarray(moved)
    assert np.isinf(moved[0, 1]) and np.isnan(moved[1, 0])
    assert moved[0, 0] != 0.5 and moved[1, 1] != 2.0


def test_a_lone_use_read_through_its_sign_fails_by_the_share_it_carries():
    """One use, held to the answer's whole share, is not resized again: read only through its
    sign, it changes too little of the result under the shift-and-scale perturbation."""
    import jax
    import jax.numpy as jnp

    def answer(x):
        return jax.lax.cumsum(x) * 2.0

    def lone_sign(x):
        done = jnp.tril(jnp.ones((x.size, x.size))) @ x
        return jnp.sign(jax.lax.cumsum(x)) * jnp.abs(done) * 2.0

    (said,) = _judged(lone_sign, _profile(answer))
    assert "does not change the TODO's result" in said


def test_a_todo_read_in_place_under_shard_map_is_run_there_with_its_collective_perturbed():
    """A TODO called inside the koan's shard_map had no liveness (red team 7a: a whole-batch
    gradient beside the scan whose sum a computed where selected away passed 03): its call is
    placed on a mesh of its own axes (meshes.mapped) and its collective perturbed there."""
    import jax
    import jax.numpy as jnp

    from jaxkoans.api import program
    from jaxkoans.plugin import liveness, meshes

    mesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Auto,))

    def total(b):
        return jax.lax.psum(b * b, "i")

    def selected_away(b):  # the psum computed, a gather of every block does the work
        honest = jax.lax.psum(b * b, "i")
        other = jax.lax.all_gather(b * b, "i").sum(0)
        return jnp.where(jnp.isnan(honest), honest, other)

    found = []
    for todo in (total, selected_away):
        placed = []

        def koan(b, todo=todo, placed=placed):
            placed.append(meshes.placed((b,), {}, {"i": 8}, False))
            return todo(b)

        spec = jax.P("i")
        jax.jit(jax.shard_map(koan, mesh=mesh, in_specs=spec, out_specs=spec))(jnp.ones(16))
        function, args = meshes.mapped(todo, placed[0], 3)
        psum = program.of(function, *args).primitive("psum_invariant")
        found.append(liveness.problems(function, {"psum": psum}, args, {}, 3))
    assert found[0] == [] and "does not change the TODO" in found[1][0]


def test_a_platform_index_fed_nothing_is_no_constant_fed_to_the_technique():
    """An honest platform_dependent naming cpu, cuda and rocm: its index is the platform's, a
    constant fed nothing, and was refused as "fed zeros or constants" (red team 9a); on one
    platform's lowering the cond picks its branch by platform, so the answer's share is its own
    and the TODO is held to it."""
    import jax
    import jax.numpy as jnp

    from jaxkoans.plugin import liveness

    exact = lambda v: jax.nn.gelu(v, approximate=False)  # noqa: E731
    approx = lambda v: jax.nn.gelu(v, approximate=True)  # noqa: E731

    def answer(x):
        return jax.lax.platform_dependent(x, tpu=approx, default=exact)

    def honest(x):
        return jax.lax.platform_dependent(x, cpu=exact, cuda=exact, rocm=exact, tpu=approx)

    index = next(
        e.primitive for e in jax.make_jaxpr(honest)(jnp.ones(3)).eqns
        if e.primitive.name == "platform_index"
    )  # fmt: skip
    x, technique = jnp.linspace(-3.0, 3.0, 7), {"platform_index": index}
    carried: dict = {}  # an author's run: the answer's shares (what it says is not held)
    liveness.problems(jax.jit(answer), technique, (x,), {}, 3, carried=carried)
    assert carried["platform_index"] == 0.0  # the branch is picked by platform, not by it
    assert liveness.problems(jax.jit(honest), technique, (x,), {}, 3, carried) == []


def test_an_integer_technique_is_tried_at_other_values_where_the_first_changes_nothing():
    """An index moved by its lowest bit may pick an entry equal to its own: the next values
    are tried before the use is said to carry nothing."""
    import jax.numpy as jnp
    import numpy as np

    from jaxkoans.plugin import liveness

    table = jnp.array([5.0, 5.0, 7.0, 9.0])
    value = jnp.array([0], jnp.int32)
    got = [np.asarray(table[liveness._changed(value, flip=f)]).item() for f in liveness.FLIPS]
    assert got == [5.0, 7.0, 9.0]  # the first flip alone would have said "changes nothing"


def test_the_rows_a_ragged_dot_leaves_uncovered_are_not_perturbed():
    """Rows past the sum of the group sizes are zero by the ragged dot's definition: perturbed,
    they made the answer's share count rows an honest TODO zeroes its own way (03
    `grouped_experts`, refused before)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxkoans.plugin import liveness

    lhs, rhs = jnp.ones((6, 2)), jnp.ones((2, 2, 3))
    sizes = jnp.array([2, 1], jnp.int32)
    primitive = next(
        e.primitive for e in jax.make_jaxpr(jax.lax.ragged_dot)(lhs, rhs, sizes).eqns
        if e.primitive.name == "ragged_dot_general"
    )  # fmt: skip
    keep = np.asarray(liveness._uncovered(primitive, (lhs, rhs, sizes), jnp.zeros((6, 3))))
    assert keep[:, 0].tolist() == [False, False, False, True, True, True]
    assert liveness._uncovered(_cumsum(), (lhs,), lhs) is None  # any other primitive: none


def test_a_technique_an_eager_shard_map_cannot_watch_is_watched_under_jit():
    """Red team 11b: 05 leaky_sum_per_shard calls its kernel in an eager shard_map over an
    Explicit mesh, which refuses the watch's callbacks: its liveness never ran, and the kernel
    fed zeros beside a cumsum doing the work passed. It is watched under jit instead."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax._src import ffi  # ffi_call_p: no public name in 0.12

    from jaxkoans.api import cbuild
    from jaxkoans.plugin import liveness

    target = cbuild.ffi_target("koans_leaky_sum_sharded", "leaky_sum.cc", "LeakySum")
    mesh = jax.make_mesh((2,), ("batch",), axis_types=(jax.sharding.AxisType.Explicit,))
    x = jax.device_put(jnp.arange(32.0).reshape(8, 4) / 7, jax.NamedSharding(mesh, jax.P("batch")))

    def kernel(block):
        like = jax.ShapeDtypeStruct(block.shape, block.dtype)
        return jax.ffi.ffi_call(target, like)(block, decay=np.float32(0.5), reverse=False)

    def per_shard(local):
        return jax.shard_map(local, mesh=mesh, in_specs=jax.P("batch"), out_specs=jax.P("batch"))

    def honest(x):
        return per_shard(kernel)(x)

    def on_zeros(x):
        return per_shard(lambda b: kernel(jnp.zeros_like(b)) + jnp.cumsum(b, axis=1))(x)

    technique = {"ffi_call": ffi.ffi_call_p}
    assert liveness.problems(honest, technique, (x,), {}, 3) == []
    assert "fed zeros or constants" in liveness.problems(on_zeros, technique, (x,), {}, 3)[0]


def test_a_technique_on_values_in_host_memory_is_watched_under_jit():
    """06 host_adam_step: the eager watch of a compute_on handed values in host memory raises
    (a memory kind mismatch), so its liveness never ran; under jit a compute_on fed zeros beside
    the update done on the device is refused."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.compute_on import compute_on

    from jaxkoans.plugin import liveness

    host, device = jax.memory.Space.Host, jax.memory.Space.Device
    on_host = compute_on(lambda w, g: w - 0.1 * g, compute_type="device_host", out_memory_spaces=device)

    def step(w, g):
        return on_host(jax.device_put(w, host), jax.device_put(g, host))

    def on_zeros(w, g):
        zeros = [jax.device_put(jnp.zeros_like(v), host) for v in (w, g)]
        return on_host(*zeros) + w - 0.1 * g

    w, g = jnp.linspace(1, 2, 8), jnp.linspace(-1, 1, 8)
    eqns = jax.make_jaxpr(step)(w, g).eqns
    (technique,) = [e.primitive for e in eqns if e.primitive.name == "compute_on"]
    assert liveness.problems(step, {"compute_on": technique}, (w, g), {}, 3) == []
    found = liveness.problems(on_zeros, {"compute_on": technique}, (w, g), {}, 3)
    assert "fed zeros or constants" in found[0]


def _with_dead_use(x):  # honest, with dead code: a use no output depends on
    import jax

    s = jax.lax.cumsum(x)
    jax.lax.cumsum(2 * x)
    return s, jax.lax.cumsum(x) * s


def test_a_use_no_output_depends_on_is_dead_code_not_a_use_selected_away():
    """Red team 12a: an honest ZeRO step resharded the params for an Adam update that never
    reads them, and was refused as a use "selected away". A use the program read holds as dead
    code is excused; one a computed where selects away is live there, and still refused."""
    import jax.numpy as jnp

    from jaxkoans.api import program
    from jaxkoans.plugin import liveness

    def dead(function):
        read = program.of(function, jnp.linspace(*X))
        return {"cumsum": read.every()["cumsum"] - read.live()["cumsum"]}

    answer, x = _profile(_honest), jnp.linspace(*X)
    assert dead(_with_dead_use) == {"cumsum": 1} and dead(_selected_away) == {"cumsum": 0}
    technique = {"cumsum": _cumsum()}
    assert liveness.problems(_with_dead_use, technique, (x,), {}, 3, answer, None, dead(_with_dead_use)) == []
    assert "resizing what use" in liveness.problems(_with_dead_use, technique, (x,), {}, 3, answer)[0]
    (said,) = liveness.problems(_selected_away, technique, (x,), {}, 3, answer, None, dead(_selected_away))
    assert "resizing what use" in said
