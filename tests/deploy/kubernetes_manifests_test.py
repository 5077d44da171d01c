"""deploy/kubernetes, checked without a cluster: every manifest parses (python3-yaml) and keeps the invariants
that tie it to the code and the shipped configs — ports are the configs' defaults, probes hit the path the
metrics server serves, the socket's hostPath holds the agent's default socket, the agent's memory limit covers
its measured baseline plus the capture budget of configs/agent.yaml, GPU/TPU taints are tolerated, and the analysis'
Indexed Job gives each of its N pods its own shard I/N of the run's hosts."""
import glob
import os
import re
import unittest

import yaml

SOURCE = os.path.join(os.path.dirname(__file__), "../..")
# The agent's idle RSS, measured at 1 s sampling (docs/kubernetes.md): 21 MiB, rounded up.
AGENT_BASELINE_MIB = 32


def read(path):
    with open(os.path.join(SOURCE, path)) as f:
        return f.read()


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def mebibytes(quantity):
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", quantity)
    if not m:
        raise ValueError(f"memory quantity {quantity!r} is not <n>Ki|Mi|Gi")
    return int(m.group(1)) * units[m.group(2)]


class KubernetesManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = []
        for path in sorted(glob.glob(os.path.join(SOURCE, "deploy/kubernetes/**/*.yaml"), recursive=True)):
            with open(path) as f:
                cls.docs += [d for d in yaml.safe_load_all(f) if d]
        cls.agent_config = yaml.safe_load(read("configs/agent.yaml"))
        cls.coordinator_config = yaml.safe_load(read("configs/coordinator.yaml"))

    def one(self, kind, name):
        found = [d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name]
        self.assertEqual(len(found), 1, f"{kind}/{name}")
        return found[0]

    def container(self, kind, name):
        return self.one(kind, name)["spec"]["template"]["spec"]["containers"][0]

    def ports(self, container):
        return {p["name"]: p["containerPort"] for p in container["ports"]}

    def test_every_manifest_names_its_kind_and_namespace(self):
        self.assertGreaterEqual(len(self.docs), 5)
        for doc in self.docs:
            self.assertIn("apiVersion", doc)
            if doc["kind"] != "Namespace":
                self.assertEqual(doc["metadata"]["namespace"], "podscope", doc["metadata"]["name"])

    def test_ports_are_the_configs_defaults(self):
        agent = self.ports(self.container("DaemonSet", "podscope-agent"))
        self.assertEqual(agent["grpc"], port_of(self.agent_config["listen"]))
        self.assertEqual(agent["metrics"], port_of(self.agent_config["metrics_listen"]))
        coordinator = self.ports(self.container("Deployment", "podscope-coordinator"))
        self.assertEqual(coordinator["grpc"], port_of(self.coordinator_config["listen"]))
        self.assertEqual(coordinator["metrics"], port_of(self.coordinator_config["metrics_listen"]))
        service = {p["name"]: p for p in self.one("Service", "podscope-coordinator")["spec"]["ports"]}
        self.assertEqual(service["grpc"]["port"], coordinator["grpc"])
        self.assertEqual(service["metrics"]["port"], coordinator["metrics"])
        # The agents register with the Service's gRPC port.
        args = self.container("DaemonSet", "podscope-agent")["args"]
        self.assertIn(f"--coordinator=podscope-coordinator.podscope.svc:{coordinator['grpc']}", args)
        # Scrape annotations name the metrics ports.
        for kind, name, port in (("DaemonSet", "podscope-agent", agent["metrics"]),
                                 ("Deployment", "podscope-coordinator", coordinator["metrics"])):
            annotations = self.one(kind, name)["spec"]["template"]["metadata"]["annotations"]
            self.assertEqual(annotations["prometheus.io/port"], str(port))
            self.assertEqual(annotations["prometheus.io/path"], "/metrics")

    def test_probes_get_a_path_the_metrics_server_serves_on_the_metrics_port(self):
        served = set(re.findall(r'path == "(/[a-z]+)"', read("daemon/metrics_server.cc")))
        self.assertIn("/healthz", served)
        for kind, name in (("DaemonSet", "podscope-agent"), ("Deployment", "podscope-coordinator")):
            container = self.container(kind, name)
            for probe in ("livenessProbe", "readinessProbe"):
                get = container[probe]["httpGet"]
                self.assertIn(get["path"], served, f"{name} {probe}")
                self.assertEqual(get["port"], "metrics", f"{name} {probe}")

    def test_the_socket_hostpath_holds_the_agents_default_socket(self):
        flag_default = re.search(r'std::string socket = "([^"]+)"', read("agent/agent_config.h")).group(1)
        self.assertEqual(flag_default, self.agent_config["socket"])
        spec = self.one("DaemonSet", "podscope-agent")["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in spec["containers"][0]["volumeMounts"]}
        socket_dir = os.path.dirname(flag_default)
        host_paths = [n for n, v in volumes.items() if v.get("hostPath", {}).get("path") == socket_dir]
        self.assertEqual(len(host_paths), 1, f"no hostPath volume {socket_dir}")
        self.assertEqual(mounts[host_paths[0]], socket_dir)
        self.assertTrue(socket_dir.startswith("/run/podscope"))

    def test_kineto_traces_go_into_the_hostpath_of_a_read_only_agent_without_capabilities(self):
        # The shape tests/integration/kineto_handoff_test.cc and kineto_torch_test.py run the agent in: only the
        # hostPath writable, no capability; the trace directories (each uid's, by an ACL) lie in it.
        flag_default = re.search(r'std::string kineto_trace_dir = "([^"]+)"', read("agent/agent_config.h")).group(1)
        self.assertEqual(flag_default, self.agent_config["kineto_trace_dir"])
        spec = self.one("DaemonSet", "podscope-agent")["spec"]["template"]["spec"]
        container = spec["containers"][0]
        self.assertTrue(container["securityContext"]["readOnlyRootFilesystem"])
        self.assertEqual(container["securityContext"]["capabilities"]["drop"], ["ALL"])
        self.assertNotIn("add", container["securityContext"]["capabilities"])
        host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
        mounted = [m["mountPath"] for m in container["volumeMounts"]
                   if m["name"] in host_paths and not m.get("readOnly")]
        self.assertTrue(any(flag_default.startswith(path + "/") for path in mounted), mounted)
        self.assertFalse(any(arg.startswith("--kineto_trace_dir") for arg in container["args"]))

    def test_agent_shares_the_nodes_pid_namespace_and_tolerates_gpu_and_tpu_taints(self):
        spec = self.one("DaemonSet", "podscope-agent")["spec"]["template"]["spec"]
        self.assertTrue(spec["hostPID"])
        tolerated = {t["key"] for t in spec["tolerations"] if t.get("operator") == "Exists"}
        self.assertLessEqual({"nvidia.com/gpu", "google.com/tpu"}, tolerated)

    def test_daemons_serve_mutual_tls_from_a_mounted_secret(self):
        for kind, name in (("DaemonSet", "podscope-agent"), ("Deployment", "podscope-coordinator")):
            pod = self.one(kind, name)["spec"]["template"]["spec"]
            container = pod["containers"][0]
            flags = dict(a[2:].split("=", 1) for a in container["args"] if a.startswith("--") and "=" in a)
            mounts = {m["name"]: m for m in container["volumeMounts"]}
            self.assertTrue(mounts["tls"]["readOnly"], name)
            secret = next(v for v in pod["volumes"] if v["name"] == "tls")["secret"]
            self.assertEqual(secret["secretName"], f"{name}-tls")
            for key, file in (("tls_cert", "tls.crt"), ("tls_key", "tls.key"), ("tls_client_ca", "ca.crt")):
                self.assertEqual(flags[key], os.path.join(mounts["tls"]["mountPath"], file), f"{name} --{key}")
            self.assertIn("podscope-cli", flags["allowed_clients"].split(","), name)
            # Every flag is a key of the daemon's documented config.
            config = self.agent_config if kind == "DaemonSet" else self.coordinator_config
            for key in flags:
                self.assertIn(key, set(config) | {"config"}, f"{name} --{key}")
        agent_flags = dict(a[2:].split("=", 1) for a in self.container("DaemonSet", "podscope-agent")["args"])
        self.assertTrue(agent_flags["plaintext_listen"].startswith("127.0.0.1:"))

    def test_agent_memory_limit_covers_baseline_and_capture_budget(self):
        resources = self.container("DaemonSet", "podscope-agent")["resources"]
        budget = self.agent_config["capture_memory_limit_mb"]
        # A flight-recorder budget, when the config has one, must fit too.
        budget += sum(v for k, v in self.agent_config.items() if k.startswith("recorder") and k.endswith("_mb"))
        self.assertGreaterEqual(mebibytes(resources["limits"]["memory"]), AGENT_BASELINE_MIB + budget)
        self.assertGreaterEqual(mebibytes(resources["requests"]["memory"]), AGENT_BASELINE_MIB)

    def test_the_analysis_job_gives_each_pod_its_own_shard_of_the_runs_hosts(self):
        job = self.one("Job", "podscope-analyze")["spec"]
        self.assertEqual(job["completionMode"], "Indexed")
        self.assertLessEqual(job["parallelism"], job["completions"])
        container = job["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        # --hosts I/N with I the pod's index and N the completions: shards 0..N-1, each host in exactly one.
        self.assertEqual(container["command"], ["podscope"])
        self.assertEqual(container["args"][:2], ["analyze", "$(PODSCOPE_RUN)"])
        self.assertIn("--hosts=$(JOB_COMPLETION_INDEX)/$(SHARDS)", container["args"])
        self.assertEqual(int(env["SHARDS"]["value"]), job["completions"])
        self.assertEqual(env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "metadata.annotations['batch.kubernetes.io/job-completion-index']")
        # The image whose package installs the CLI, and every flag one `podscope analyze` takes.
        self.assertEqual(container["image"], self.container("Deployment", "podscope-coordinator")["image"])
        self.assertIn("COMPONENT coordinator", read("cli/CMakeLists.txt"))
        flags = {a.split("=", 1)[0] for a in container["args"] if a.startswith("--")}
        self.assertLessEqual(flags, set(re.findall(r'add_option\("(--[a-z-]+)"', read("cli/analyze_command.cc"))))
        # As many jobs as the cores it may use; read-only but for a /tmp of its own.
        jobs = int(next(a for a in container["args"] if a.startswith("--jobs=")).split("=", 1)[1])
        self.assertLessEqual(jobs, int(container["resources"]["limits"]["cpu"]))
        self.assertTrue(container["securityContext"]["readOnlyRootFilesystem"])
        self.assertEqual({m["mountPath"] for m in container["volumeMounts"]}, {"/tmp"})


if __name__ == "__main__":
    unittest.main()
