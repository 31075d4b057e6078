"""Judging rollouts and builds from the API's JSON: pure functions, no cluster."""

from __future__ import annotations

from apps.deployments.rollout import judge_build, judge_rollout
from tests.deployments.test_health import CRASH_LOOP, ERR_IMAGE_PULL, HEALTHY_POD, NOT_READY, NOW

DEPLOYMENT_UID = "d-1"
RS_UID = "rs-2"


def k8s_deployment(
    *, generation=2, observed=2, replicas=1, updated=1, ready=1, available=1, total=1, progressing=None, revision="2"
):
    conditions = [{"type": "Available", "status": "True"}]
    if progressing:
        conditions.append({"type": "Progressing", "status": progressing[0], "reason": progressing[1]})
    return {
        "metadata": {"name": "shop", "namespace": "slipway-shop", "uid": DEPLOYMENT_UID, "generation": generation,
                     "annotations": {"deployment.kubernetes.io/revision": revision}},
        "spec": {"replicas": replicas, "progressDeadlineSeconds": 20},
        "status": {"observedGeneration": observed, "replicas": total, "updatedReplicas": updated, "readyReplicas": ready,
                   "availableReplicas": available, "conditions": conditions},
    }  # fmt: skip


def replicaset(uid=RS_UID, revision="2"):
    return {"metadata": {"name": f"shop-{uid}", "uid": uid, "annotations": {"deployment.kubernetes.io/revision": revision},
                         "ownerReferences": [{"kind": "Deployment", "uid": DEPLOYMENT_UID}]}}  # fmt: skip


def owned(pod, uid=RS_UID):
    return {**pod, "metadata": {**pod["metadata"], "ownerReferences": [{"kind": "ReplicaSet", "uid": uid}]}}


def judge(deployment, pods, *, applied=2, replicasets=None):
    return judge_rollout(deployment, replicasets or [replicaset()], pods, applied_generation=applied, now=NOW)


def test_a_complete_rollout_is_live():
    verdict = judge(k8s_deployment(), [owned(HEALTHY_POD)])
    assert (verdict.outcome, verdict.message) == ("live", "1 of 1 pod(s) ready")


def test_nothing_is_judged_before_the_cluster_observed_our_generation():
    assert judge(k8s_deployment(generation=1, observed=1), [owned(HEALTHY_POD)]) is None  # the previous rollout's status
    assert judge(k8s_deployment(generation=2, observed=1), [owned(HEALTHY_POD)]) is None
    assert judge(k8s_deployment(), [owned(HEALTHY_POD)], applied=None) is None


def test_old_pods_still_running_mean_the_rollout_is_not_done():
    assert judge(k8s_deployment(total=2, updated=1), [owned(HEALTHY_POD)]) is None


def test_a_pending_pod_that_cannot_pull_its_image_fails_the_rollout():
    verdict = judge(k8s_deployment(ready=0, available=0), [owned(ERR_IMAGE_PULL)])
    assert verdict.outcome == "failed"
    assert verdict.message.startswith("ErrImagePull in pod shop-7d9f8b6c5-x2k4p: rpc error: code = NotFound")


def test_a_crash_loop_fails_the_rollout_naming_the_exit_code_and_the_container():
    verdict = judge(k8s_deployment(ready=0, available=0), [owned(CRASH_LOOP)])
    assert verdict.outcome == "failed" and verdict.message.startswith("CrashLoopBackOff (exit code 1) in pod")
    assert (verdict.pod, verdict.container) == ("shop-7d9f8b6c5-x2k4p", "app")


def test_a_crashing_pod_of_the_old_replicaset_does_not_fail_the_new_rollout():
    assert judge(k8s_deployment(), [owned(HEALTHY_POD), owned(CRASH_LOOP, uid="rs-1")]) is not None
    assert judge(k8s_deployment(), [owned(HEALTHY_POD), owned(CRASH_LOOP, uid="rs-1")]).outcome == "live"


def test_the_progress_deadline_fails_the_rollout_and_says_readiness_is_failing():
    verdict = judge(k8s_deployment(ready=0, available=0, progressing=("False", "ProgressDeadlineExceeded")), [owned(NOT_READY)])
    assert verdict.outcome == "failed"
    assert (
        verdict.message == "ProgressDeadlineExceeded: the rollout did not finish within 20 s; readiness probe failing on 1 pod(s)"
    )


def build_pod(clone=None, plan=None, build=None):
    def cs(name, state):
        return {"name": name, "state": state or {"waiting": {"reason": "PodInitializing"}}}

    return {
        "metadata": {"name": "shop-build-3-abcde"},
        "status": {"initContainerStatuses": [cs("clone", clone), cs("plan", plan)], "containerStatuses": [cs("build", build)]},
    }


DONE = {"terminated": {"exitCode": 0, "reason": "Completed"}}
JOB = {"metadata": {"name": "shop-build-3"}, "spec": {"activeDeadlineSeconds": 1800}, "status": {}}


def test_a_build_that_pushed_reports_its_termination_message():
    pod = build_pod(DONE, DONE, {"terminated": {"exitCode": 0, "reason": "Completed", "message": '{"digest": "sha256:x"}'}})
    assert judge_build(JOB, pod).outcome == "live"
    assert judge_build(JOB, pod).message == '{"digest": "sha256:x"}'


def test_a_failed_step_is_named():
    verdict = judge_build(JOB, build_pod(DONE, {"terminated": {"exitCode": 1, "reason": "Error"}}))
    assert (verdict.outcome, verdict.container) == ("failed", "plan")


def test_a_running_build_has_no_outcome_yet():
    assert judge_build(JOB, build_pod(DONE, DONE, {"running": {"startedAt": "2026-11-30T12:00:00Z"}})) is None


def test_a_job_past_its_deadline_fails_with_that_reason():
    job = {
        **JOB,
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        },
    }
    assert judge_build(job, None).message == "build timed out after 1800 s"


def test_a_job_deleted_from_outside_fails_the_build():
    assert judge_build(None, None, job_deleted=True).message == "build failed: the build Job was deleted from outside Slipway"


def test_a_build_image_that_cannot_be_pulled_fails_the_step():
    verdict = judge_build(
        JOB, build_pod({"waiting": {"reason": "ImagePullBackOff", "message": 'Back-off pulling image "alpine/git:v2.49.1"'}})
    )
    assert verdict.message == 'clone failed: ImagePullBackOff: Back-off pulling image "alpine/git:v2.49.1"'


def test_a_job_still_running_past_its_deadline_and_the_grace_fails_as_timed_out():
    import datetime as dt

    job = {**JOB, "spec": {"activeDeadlineSeconds": 25}, "status": {"startTime": "2026-11-30T11:59:00Z"}}
    running = build_pod(DONE, DONE, {"running": {"startedAt": "2026-11-30T11:59:05Z"}})
    assert judge_build(job, running, now=NOW - dt.timedelta(seconds=30)) is None
    assert judge_build(job, running, now=NOW).message == "build timed out after 25 s"
