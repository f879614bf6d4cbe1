"""Shortcuts of the four kinds issue 44 names, written by hand beyond the generated families:
the technique kept as a proxy (A), another algorithm (B), the test read instead of the problem
(C), the lesson's guard switched off inside a fix region (D). Each must make its koan fail, by
the koan's asserts, its contract (plugin/contracts.py) or the refusal of test reads
(course/reading.py). A variant runs as the gates run theirs: `test_x__r001.py` in a directory
named after its chapter, judged as the koan file it stands for (course.twin_name), every
variant in one run (mutate.run_chapter_events)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jaxkoans import course
from jaxkoans.authoring import mutate
from jaxkoans.course import koan_model
from jaxkoans.course.koan_model import splice_body

HERE = Path(__file__).parent / "shortcut_kinds"
CHECKOUT = course.Course.here()
# body file -> (answer file, TODO function, or None for a fix region's first lines)
CASES = {
    "A1_silu_bwd_dead_kernel": ("07/test_custom_vjp_kernel.py", "silu_bwd"),
    "A2_silu_jvp_dead_tangent_kernel": ("07/test_custom_vjp_kernel.py", "silu_both_modes_jvp"),
    "A3_accumulate_idle_scan": ("06/test_grad_accumulation.py", "accumulated_grad"),
    "A4_first_crossing_loop_to_argmin": ("01/test_control_flow.py", "first_crossing"),
    "A5_custom_vmap_nested_jit": ("04/test_custom_transforms.py", "sqdist_rule"),
    "A6_ulysses_all_to_all_discarded": ("03/test_ulysses.py", "ulysses_attention"),
    "B1_deq_dense_solve_in_callback": ("04/test_deq.py", "deq_bwd"),
    "B2_hvp_hessian_in_callback": ("04/test_second_order.py", "hvp"),
    "B8_hvp_reverse_over_reverse": ("04/test_second_order.py", "hvp"),
    "B9_hvp_reverse_over_forward": ("04/test_second_order.py", "hvp"),
    "B3_heat_sine_transform": ("11/test_tridiagonal_heat.py", "heat_step"),
    "B4_implicit_newton_in_callback": ("11/test_nonlinear_implicit.py", "implicit_step"),
    "B5_ulysses_gather_by_psum": ("03/test_ulysses.py", "ulysses_attention"),
    "B6_burgers_dense_newton_by_jvps": ("11/test_newton_krylov.py", "burgers_step"),
    # issue 59: a preconditioner by a fixed inner iteration count, by none at all (the library
    # solver alone), by the grid step of the test's size
    "B20_lines_by_fixed_inner_cg_steps": ("11/test_krylov_counts.py", "line_preconditioner"),
    "B21_lines_left_to_plain_cg": ("11/test_krylov_counts.py", "line_preconditioner"),
    "H20_lines_grid_step_of_the_test": ("11/test_krylov_counts.py", "line_preconditioner"),
    "C1_coloring_closure_cells": ("04/test_jacobian_coloring.py", "colored_jacobian"),
    "C2_coloring_computed_getattr": ("04/test_jacobian_coloring.py", "colored_jacobian"),
    "C3_coloring_caller_frame": ("04/test_jacobian_coloring.py", "colored_jacobian"),
    "C4_coloring_reads_answer_file": ("04/test_jacobian_coloring.py", "colored_jacobian"),
    "C5_burgers_running_frames": ("11/test_newton_krylov.py", "burgers_step"),
    "D1_tools_config_update": ("08/test_capstone_tools.py", None),
    "D2_sharded_private_guard": ("08/test_capstone_sharded.py", None),
    "D3_training_flags_off": ("08/test_capstone_training.py", None),
    "D4_tools_watchdog_signal_off": ("08/test_capstone_tools.py", None),
    "D5_tools_skip_the_steps_the_guard_stops": ("08/test_capstone_tools.py", "train"),
    # issue 54: the technique fed nothing, selected away or copying work done elsewhere (E), the
    # same work by another primitive (F), the right primitives in the wrong structure (G)
    "E1_dropless_ragged_dot_on_zeros": ("03/test_dropless_moe.py", "grouped_experts"),
    "E2_matmul_kernel_copies_xla_result": ("07/test_kernels.py", "matmul"),
    "E3_ffi_selected_away_by_isnan": ("05/test_ffi_kernel.py", "leaky_sum_fwd"),
    "F1_softmax_by_exp2_outside_kernel": ("07/test_kernels.py", "row_softmax"),
    "G1_chunked_map_one_row_per_step": ("01/test_control_flow.py", "chunked_apply"),
    "F2_fsdp_gather_by_psum_beside_idle_all_gather": ("03/test_fsdp.py", "fsdp_loss"),
    "F3_layer_norm_by_ones_dot_outside_kernel": ("07/test_kernels.py", "layer_norm"),
    "G2_chunked_map_whole_batch_in_one_step": ("01/test_control_flow.py", "chunked_apply"),
    "G3_chunked_map_unrolled_python_loop": ("01/test_control_flow.py", "chunked_apply"),
    # right only on the tested inputs (H)
    "H1_rk4_step_sizes_looked_up": ("01/test_capstone_rk4.py", "rk4_step"),
    # issue 54's fresh shapes and run-time steps: a block count of the test's width, a loop
    # that always runs to its end behind a condition that reads the data
    "H4_quantize_mx_two_blocks_hard_coded": ("06/test_fp8.py", "quantize_mx"),
    "H5_quantize_mx_halves_sliced": ("06/test_fp8.py", "quantize_mx"),
    "G5_first_crossing_runs_to_the_end": ("01/test_control_flow.py", "first_crossing"),
    "G6_cubic_root_newton_without_a_stopping_test": ("11/test_solvers_in_practice.py", "cubic_root"),
    "G7_backward_euler_newton_runs_all_thirty_steps": ("11/test_stiff.py", "backward_euler_step"),
    "H6_matmul_grid_of_the_tests_shape": ("07/test_kernels.py", "matmul"),
    # issue 54's TODOs nobody read: a platform's branch that never runs here is run as if there
    "I1_gelu_tpu_branch_returns_tanh": ("02/test_other_platforms.py", "gelu"),
    "I2_gelu_gpu_branch_approximates_too": ("02/test_other_platforms.py", "gelu"),
    "I3_hlo_before_fusion_edited_as_text": ("02/test_compiler_options.py", "hlo_before_fusion"),
    "G8_decode_recomputes_every_score_each_step": ("01/test_paths_and_caches.py", "decode_with_cache"),
    # issue 58: ring attention's backward rule and ragged_all_to_all's arguments, the lazy ways
    "B30_ring_bwd_autodiff_of_the_forward": ("03/test_ring_attention.py", "ring_attention_bwd"),
    "B31_ring_bwd_all_gather_kv": ("03/test_ring_attention.py", "ring_attention_bwd"),
    "G30_ring_bwd_whole_buffers_passed_around": ("03/test_ring_attention.py", "ring_attention_bwd"),
    "H30_ragged_output_offsets_looked_up": ("03/test_dropless_moe.py", "ragged_all_to_all_args"),
    "F30_ragged_counts_by_all_gather": ("03/test_dropless_moe.py", "ragged_all_to_all_args"),
    "G31_ragged_landing_not_sent_back": ("03/test_dropless_moe.py", "ragged_all_to_all_args"),
    # issue 58: a hand-written lowering and fp8 delayed scaling
    "A7_batch_norm_op_dead_beside_lower_fun": ("05/test_custom_primitive.py", "batch_norm_lowering"),
    "E4_batch_norm_op_on_zero_mean": ("05/test_custom_primitive.py", "batch_norm_lowering"),
    "F4_batch_norm_lowered_by_lower_fun": ("05/test_custom_primitive.py", "batch_norm_lowering"),
    "H2_batch_norm_attributes_by_operand_shape": ("05/test_custom_primitive.py", "batch_norm_lowering"),
    "B7_fp8_scale_from_current_amax": ("06/test_fp8.py", "delayed_scaling_quantize"),
    "E5_fp8_history_recorded_never_read": ("06/test_fp8.py", "delayed_scaling_quantize"),
    "H3_fp8_window_maxima_looked_up": ("06/test_fp8.py", "delayed_scaling_quantize"),
    # issue 54 item 5: the program read is the program that ran (a TODO that counts its calls
    # and shows the reader's trace the technique, the koan's own call a dense loop)
    "J1_grouped_experts_shows_the_reader_another_call": ("03/test_dropless_moe.py", "grouped_experts"),
    # this stop's red team: the technique on one element, a one-step scan beside a Python
    # unroll, a bitcast doing stop_gradient's work
    "J2_host_sin_jvp_callback_on_one_element": ("05/test_callbacks.py", "host_sin_jvp"),
    "J3_masked_lstm_one_step_scan_rest_unrolled": ("01/test_capstone_masked_lstm.py", "masked_lstm"),
    "J4_ste_bitcast_round_trip_beside_idle_stop_gradient": ("04/test_gradient_control.py", "straight_through_round"),
    # issue 54, the third red team: a dense matrix only where jit hands a weakly typed step, a
    # cache written but never read, a head dimension written in, an untraced TODO's table
    "K1_neg_laplacian_dense_when_h_weak": ("11/test_poisson.py", "neg_laplacian"),
    "K2_decode_cache_written_never_read": ("01/test_paths_and_caches.py", "decode_with_cache"),
    "K3_decode_head_dim_written_in": ("01/test_paths_and_caches.py", "decode_with_cache"),
    "K4_bubble_fraction_table_of_the_tests_counts": ("03/test_pipeline_parallel.py", "bubble_fraction"),
    # issue 54, this stop: a scale written in (the scaled case), meets values below it
    "L1_safe_norm_threshold_written_in": ("01/test_masking.py", "safe_norm"),
    # a loop named alone is the technique: a scan's sum over itself beside the whole batch's
    # gradient; a floor written under a norm's sqrt
    "L2_accumulated_grad_whole_batch_times_scan_over_itself": ("06/test_grad_accumulation.py", "accumulated_grad"),
    "L3_safe_norm_clamped_below_a_floor": ("01/test_masking.py", "safe_norm"),
}
HONEST = Path(__file__).parent / "honest_routes"
# honest routes the lessons allow: every koan of the variant keeps its point
ROUTES = {
    "safe_norm_library_norm_behind_where": ("01/test_masking.py", "safe_norm"),
    "quantize_mx_block_max_by_sort": ("06/test_fp8.py", "quantize_mx"),
    "dropout_key_split_then_index": ("10/test_sharded_randomness.py", "dropout_key"),
    "standardize_by_all_gather": ("01/test_vmap_axes.py", "standardize"),
    "chunked_map_by_scan_of_chunks": ("01/test_control_flow.py", "chunked_apply"),
    # a do-while: one step more per run than the answer's loop, within the step bound
    "first_crossing_by_a_flag_set_in_the_body": ("01/test_control_flow.py", "first_crossing"),
    "decode_by_dynamic_slices": ("01/test_paths_and_caches.py", "decode_with_cache"),
    "gelu_by_partials_per_platform": ("02/test_other_platforms.py", "gelu"),
    "hlo_before_fusion_by_glob": ("02/test_compiler_options.py", "hlo_before_fusion"),
    "decode_by_stacked_cache": ("01/test_paths_and_caches.py", "decode_with_cache"),
    # FlashAttention-2's exp2 of scores scaled by log2(e): the contract's exp met by exp2
    "gpu_flash_by_exp2": ("07/test_gpu_flash_attention.py", "gpu_flash_attention_forward"),
}


def _variant(answer: Path, function: str | None, body: str) -> str:
    text = answer.read_text(encoding="utf-8")
    if function:
        return splice_body(text, function, body)
    out = []
    for line in text.splitlines(keepends=True):
        out.append(line)
        if line.strip() == "# ✍️ BEGIN":
            indent = line[: len(line) - len(line.lstrip())]
            out += [indent + extra + "\n" for extra in body.splitlines()]
    return "".join(out)


def _seeing(model, function: str | None) -> tuple[str, ...]:
    """The koans whose run reaches the changed function (or any fix region): the others run
    the answer's code unchanged, so running them tells nothing."""
    if function in model.definitions:
        return model.koans_seeing(model.definitions[function][0])
    if function is None and model.regions:
        seeing = {k for start, _ in model.regions for k in model.koans_seeing(start)}
        return tuple(k.name for k in model.koans if k.name in seeing)
    return tuple(k.name for k in model.koans)


@pytest.fixture(scope="module")
def runs() -> tuple[dict[str, list[dict]], str]:
    """Every case's variant run as the gates run theirs, all in one pytest process (one start of
    JAX and its workers): {case: its koans' record events}, and a problem of the run, or ""."""
    chapters: dict[str, list[mutate.Variant]] = {}
    modules = {}
    every = {
        **{c: (HERE, *v) for c, v in CASES.items()},
        **{c: (HONEST, *v) for c, v in ROUTES.items()},
    }
    for number, case in enumerate(sorted(every), 1):
        folder, relative, function = every[case]
        chapter, name = relative.split("/")
        answer = CHECKOUT.answers / relative
        source = _variant(answer, function, (folder / f"{case}.txt").read_text(encoding="utf-8"))
        variant = name.replace(".py", f"__r{number:03d}.py")
        koans = _seeing(koan_model.parse(source), function)
        chapters.setdefault(chapter, []).append(mutate.Variant(variant, source, koans))
        modules[case] = (chapter, variant)
    events, problem = mutate.run_chapter_events(CHECKOUT, chapters)
    case_of = {module: case for case, module in modules.items()}
    by_case = {case: [] for case in every}
    for event in events:
        found = Path(event.get("path", ""))
        if (found.parent.name, found.name) in case_of:
            by_case[case_of[found.parent.name, found.name]].append(event)
    return by_case, problem


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_shortcut_of_each_kind_fails_its_koan(case, runs):
    by_case, problem = runs
    events = by_case[case]
    assert events, f"no koan of the variant reported (the run: {problem or 'finished'})"
    states = {e.get("name", e["path"]): e.get("state", "collect-error") for e in events}
    assert any(state != "passed" for state in states.values()), states
    not_started = [name for name, state in states.items() if state == "not_started"]
    assert not not_started, f"the variant failed as not started: {not_started}"


@pytest.mark.parametrize("case", sorted(ROUTES))
def test_an_honest_route_keeps_every_point(case, runs):
    by_case, problem = runs
    events = by_case[case]
    assert events, f"no koan of the variant reported (the run: {problem or 'finished'})"
    states = {e.get("name", e["path"]): e.get("state", "collect-error") for e in events}
    failed = {name: state for name, state in states.items() if state != "passed"}
    assert not failed, {n: (s, e.get("message", "")[-600:]) for e in events
                        for n, s in failed.items() if e.get("name") == n}  # fmt: skip
