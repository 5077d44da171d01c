"""A real JAX trainer profiled live: an agent with the trainer's profiler server (jax.profiler.start_server) as
its upstream, captured by `podscope capture`; `podscope analyze` finds the steps of its
`jax.profiler.StepTraceAnnotation("train", step_num=i)` and their times are the annotations' durations, as the
trainer measured them around each annotation. A directory written by `jax.profiler.trace(...)` analyses offline.

Runs under the tf framework environment (tests/python_env.sh); PODSCOPE_BIN names the built binaries."""
import json
import os
import tempfile
import unittest

from framework_pod import FrameworkPod, Trainer, analyze, check_cpu_program_pod, host_files, steps_in


def step_times_of(pipeline):
    """{step number: step time, ms} of the input pipeline analyzer's per-step details."""
    return {int(d["stepNumber"]): d["stepTimeMs"] for d in pipeline["stepDetails"]}


def read_json(directory, name):
    with open(os.path.join(directory, name)) as f:
        return json.load(f)


class JaxTrainerBehindAnAgent(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="podscope_jax_live_")

    def tearDown(self):
        self.tmp.cleanup()

    def test_the_agent_proxies_jax_and_each_step_is_its_step_trace_annotation(self):
        with FrameworkPod([("jax", [])], seconds=600) as pod:
            code, out, run_dir = pod.capture(os.path.join(self.tmp.name, "tb"), 2000)
            trainer_steps = pod.trainers[0].steps()
        self.assertEqual(code, 0, out)
        code, out = analyze(run_dir)
        self.assertEqual(code, 0, out)
        pipeline = read_json(run_dir, "input_pipeline.json")
        check_cpu_program_pod(self, out, pipeline)
        ours = step_times_of(pipeline)
        self.assertGreaterEqual(len(ours), 3, out)
        own = {n: (e - s) / 1e6 for n, s, e in trainer_steps}
        for step in ours:
            self.assertIn(step, own, f"podscope's step {step} is one of the trainer's")
        self.assert_steps_are_the_annotations(ours, own)
        print(f"jax live: {len(ours)} steps, podscope mean {sum(ours.values()) / len(ours):.3f} ms, trainer "
              f"{sum(own[n] for n in ours) / len(ours):.3f} ms over the same steps", flush=True)
        self.assertTrue(host_files(run_dir))

    def test_a_jax_profiler_trace_directory_analyses_offline(self):
        trace_dir = os.path.join(self.tmp.name, "jax_trace")
        trainer = Trainer("jax", 1.5, extra=["--trace_dir", trace_dir])
        try:
            summary = trainer.summary()
            trainer_steps = trainer.steps()
        finally:
            trainer.stop()
        self.assertGreater(summary["steps"], 0)
        run_root = os.path.join(trace_dir, "plugins", "profile")
        run_dir = os.path.join(run_root, sorted(os.listdir(run_root))[-1])
        code, out = analyze(run_dir)
        self.assertEqual(code, 0, out)
        ours = step_times_of(read_json(run_dir, "input_pipeline.json"))
        own = {n: (e - s) / 1e6 for n, s, e in steps_in(trainer_steps, 0, 2 ** 63)}
        self.assertTrue(ours, out)
        self.assert_steps_are_the_annotations(ours, own)

    def assert_steps_are_the_annotations(self, ours, own):
        # The trainer's clock reads surround the annotation: its span is the annotation's plus the Python that enters
        # and leaves it, which a loaded 2-core box stretches by a few hundred microseconds now and then, and by
        # milliseconds when the trainer is descheduled between the two (once in a fresh clone's CI run: 11.4 against
        # 13.6 ms). So each step is at most the trainer's; all but one in twenty (at least one) are at least the
        # trainer's less 5 % + 0.5 ms; and the mean agrees within 2 % + 0.2 ms.
        stretched = []
        for step, ms in ours.items():
            self.assertLessEqual(ms, own[step] + 0.01, f"step {step}: podscope {ms:.3f} ms, trainer {own[step]:.3f} ms")
            if ms < own[step] * 0.95 - 0.5:
                stretched.append(f"step {step}: podscope {ms:.3f} ms, trainer {own[step]:.3f} ms")
        self.assertLessEqual(len(stretched), max(1, len(ours) // 20), "; ".join(stretched))
        mean_ours = sum(ours.values()) / len(ours)
        mean_own = sum(own[n] for n in ours) / len(ours)
        self.assertAlmostEqual(mean_ours, mean_own, delta=0.02 * mean_own + 0.2)


if __name__ == "__main__":
    unittest.main()
