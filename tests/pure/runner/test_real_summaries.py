"""The ``real`` section's gradients: summaries made on the owners (``distviz trace``) read the
same as summaries made from the tensors (``distviz run``)."""

from __future__ import annotations

import torch

from distviz.runner.gradients import summarize
from distviz.runner.observe_real import Passes, RealRun


def test_summaries_from_owners_equal_summaries_made_from_the_tensors() -> None:
    torch.manual_seed(0)
    grads = {"ps/AccumulateGrad(w)": torch.randn(2000, 64),
             "trainer/AccumulateGrad(b)": torch.randn(3),
             "ps/AccumulateGrad(e)": torch.randn(5, 4).to_sparse()}
    from_tensors = RealRun(passes=Passes(), hang_timeout=1.0, gradients=dict(grads))
    from_owners = RealRun(passes=Passes(), hang_timeout=1.0,
                          summaries={k: summarize(g) for k, g in grads.items()})
    mixed = RealRun(passes=Passes(), hang_timeout=1.0,
                    gradients={"trainer/AccumulateGrad(b)": grads["trainer/AccumulateGrad(b)"]},
                    summaries={k: summarize(g) for k, g in grads.items() if k.startswith("ps/")})
    want = from_tensors.to_json()["gradients"]
    assert list(want) == sorted(grads)
    assert want["trainer/AccumulateGrad(b)"]["values"] == [
        float(x) for x in grads["trainer/AccumulateGrad(b)"].double()]
    assert want["ps/AccumulateGrad(e)"]["layout"] == "sparse_coo"
    assert from_owners.to_json()["gradients"] == want
    assert mixed.to_json()["gradients"] == want
    assert list(mixed.to_json()["gradients"]) == list(want)


def test_a_gradient_is_all_zeros_only_when_no_element_is_non_zero() -> None:
    assert summarize(torch.zeros(2000, 64))["zero"] is True
    assert summarize(torch.zeros(3, dtype=torch.float64))["zero"] is True
    assert summarize(torch.tensor([0.0, -0.0]))["zero"] is True
    assert summarize(torch.tensor([0.0, 1e-30]))["zero"] is False
    # float64 values whose squares underflow: a norm of 0, and still not all zeros
    tiny = torch.tensor([0.0, 1e-200], dtype=torch.float64)
    assert summarize(tiny)["norm"] == 0.0 and summarize(tiny)["zero"] is False
    assert summarize(torch.tensor([float("nan"), 0.0]))["zero"] is False
    assert summarize(torch.zeros(5, 4).to_sparse())["zero"] is True
