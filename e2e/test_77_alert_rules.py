"""deploy/monitoring/prometheusrule.yaml, our alerts (issue 23): the PrometheusRule's rule groups
pass `promtool check rules` and the unit tests of e2e/fixtures/alert_rules_test.yaml (`promtool
test rules`), use only metric names the daemon exports, are documented, and go pending in a real
Prometheus scraping the real daemon while what they describe happens: a service the kernel
refuses, tables flushed again and again, syncs that all fail (the last two made with the libnftables
helper's failpoint, as e2e/test_42_isolation.py explains)."""
import os
import re
import shutil
import subprocess

import pytest
import yaml

import netlab
from netlab import endpoint_slice, node_object, service
from prometheus_lab import Prometheus, static_job, wait_for
from test_75_metrics_health import METRICS, sample, scrape

pytestmark = pytest.mark.usefixtures("daemon_bin")

RULE = os.path.join(netlab.REPO, "deploy", "monitoring", "prometheusrule.yaml")
UNIT_TESTS = os.path.join(netlab.HERE, "fixtures", "alert_rules_test.yaml")
HTTP = [("http", 80, "TCP", 8080)]
HTTP_SLICE = [("http", 8080, "TCP")]


def rule_groups():
    with open(RULE) as f:
        (rule,) = [d for d in yaml.safe_load_all(f) if d]
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    return rule["spec"]["groups"]


def alert_names():
    return [r["alert"] for g in rule_groups() for r in g["rules"]]


def test_the_rules_pass_promtool_check_and_unit_tests_and_name_exported_metrics(tmp_path):
    # promtool reads plain rule files: the PrometheusRule's spec is one.
    with open(tmp_path / "rules.yaml", "w") as f:
        yaml.safe_dump({"groups": rule_groups()}, f, sort_keys=False)
    shutil.copy(UNIT_TESTS, tmp_path / "test.yaml")
    check = subprocess.run(["promtool", "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(alert_names())} rules found" in check.stdout, check.stdout
    unit = subprocess.run(["promtool", "test", "rules", "test.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert unit.returncode == 0, unit.stdout + unit.stderr
    # Every alert has its unit tests.
    with open(UNIT_TESTS) as f:
        tested = {t["alertname"] for case in yaml.safe_load(f)["tests"] for t in case["alert_rule_test"]}
    assert tested == set(alert_names())

    with open(os.path.join(netlab.REPO, "pkg", "metrics", "proxy_metrics.cc")) as f:
        exported = set(re.findall(r'\.Name\("([a-z_]+)"\)', f.read()))
    used = {m for g in rule_groups() for r in g["rules"] for m in re.findall(r"\b(kubeproxy_[a-z_]+)\{", r["expr"])}
    assert used and used <= exported, used - exported
    with open(os.path.join(netlab.REPO, "docs", "operations.md")) as f:
        docs = f.read()
    assert [a for a in alert_names() if f"`{a}`" not in docs] == [], "alerts docs/operations.md does not explain"


def active(prom):
    return {a["labels"]["alertname"]: a["state"] for a in prom.alerts() or []}


def test_a_refused_service_and_repeated_repairs_make_their_alerts_pending(lab):
    a, b = lab.add_backends(2, tcp=[8080], udp=[])
    m = lab.manifests
    m.write("node.yaml", node_object())
    m.write("web.yaml", [service("web", HTTP, ["10.96.5.11"]), endpoint_slice("web", [a.v4], HTTP_SLICE)])
    m.write("bad.yaml", [service("bad", HTTP, ["10.96.5.12"]), endpoint_slice("bad", [b.v4], HTTP_SLICE)])
    d = lab.start_daemon(env={"KPN_FAULT_REFUSE_TEXT": '"default/bad:http"'})
    prom = Prometheus(lab, [static_job("kube-proxy", METRICS)], rule_groups())
    wait_for(lambda: active(prom).get("KubeProxyNftServicesRejected") == "pending", 30,
             "KubeProxyNftServicesRejected pending")

    # Someone flushes our table, again and again: each time the daemon repairs it (a reconcile).
    def repairs():
        return sample(scrape(lab), "kubeproxy_nftables_table_reconcile_total", plan="reconcile", result="committed")
    wait_for(lambda: prom.query('kubeproxy_nftables_table_reconcile_total{plan="reconcile",result="committed"}'), 20,
             "the start-up reconcile scraped")
    for n in range(4):
        before = repairs()
        netlab.sh(["nft", "flush", "table", "ip", "kube-proxy"], ns=lab.node)
        wait_for(lambda: repairs() > before, 10, f"repair {n + 1}")
        wait_for(lambda: prom.query(f'kubeproxy_nftables_table_reconcile_total{{plan="reconcile",result="committed"}} > {before}'),
                 10, f"repair {n + 1} scraped")
    wait_for(lambda: active(prom).get("KubeProxyNftTablesRepairedRepeatedly") == "pending", 20,
             "KubeProxyNftTablesRepairedRepeatedly pending")
    prom.wait_evaluated()
    assert "KubeProxyNftSyncsFailing" not in active(prom), active(prom)
    assert not d.failed_syncs()


def test_syncs_that_all_fail_make_their_alert_pending(lab):
    lab.manifests.write("node.yaml", node_object())
    # The helper refuses every transaction that writes into our tables, as a kernel that refuses
    # every commit would (the start-up probe's scratch tables pass: the node has nftables).
    # Retries come every 2 s at most (the sync period).
    d = lab.daemon(sync_flags=("--min-sync-period=0s", "--sync-period=2s"),
                   env={"KPN_FAULT_REFUSE_TEXT": '"table":"kube-proxy"'}).start()
    wait_for(lambda: d.failed_syncs(), 20, "a failed sync")
    prom = Prometheus(lab, [static_job("kube-proxy", METRICS)], rule_groups())
    wait_for(lambda: active(prom).get("KubeProxyNftSyncsFailing") == "pending", 30, "KubeProxyNftSyncsFailing pending")
    assert "sync done" not in d.stderr()
