"""A real JAX trainer profiled live: an agent with the trainer's profiler server (jax.profiler.start_server) as
its upstream, captured by `podscope capture`; `podscope analyze` finds the steps of its
`jax.profiler.StepTraceAnnotation("train", step_num=i)` and their times are the annotations' durations, as the
trainer measured them around each annotation. A directory written by `jax.profiler.trace(...)` analyses offline.

Runs under the tf framework environment (tests/python_env.sh); PODSCOPE_BIN names the built binaries."""
import json
import os
import tempfile
import unittest

from framework_pod import FrameworkPod, Trainer, analyze, host_files, steps_in


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
        ours = step_times_of(pipeline)
        self.assertGreaterEqual(len(ours), 3, out)
        own = {n: (e - s) / 1e6 for n, s, e in trainer_steps}
        for step, ms in ours.items():
            self.assertIn(step, own, f"podscope's step {step} is one of the trainer's")
            # The trainer's clock reads surround the annotation: its span is the annotation's plus two clock reads.
            self.assertAlmostEqual(ms, own[step], delta=0.02 * own[step] + 0.2,
                                   msg=f"step {step}: podscope {ms:.3f} ms, the trainer's {own[step]:.3f} ms")
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
        for step, ms in ours.items():
            self.assertAlmostEqual(ms, own[step], delta=0.02 * own[step] + 0.2, msg=f"step {step}")


if __name__ == "__main__":
    unittest.main()
