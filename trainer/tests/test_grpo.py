"""slime's GRPO math: group-normalised advantages, the asymmetric clip, the low-variance KL."""
import torch

from infir2_trainer.train_rl import grpo_advantages, low_var_kl, policy_loss


def test_group_normalised_advantages():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0])
    a = grpo_advantages(r, 4).view(3, 4)
    g0 = torch.tensor([1.0, 0.0, 0.0, 1.0])
    assert torch.allclose(a[0], (g0 - 0.5) / (g0.std() + 1e-6))  # torch.std: unbiased (N-1)
    assert torch.equal(a[1], torch.zeros(4))  # an all-correct group carries no signal
    assert a[2, 3] > 0 and (a[2, :3] < 0).all()
    assert torch.allclose(a.sum(-1), torch.zeros(3), atol=1e-6)
    dr = grpo_advantages(r, 4, std_normalize=False).view(3, 4)  # --disable-grpo-std-normalization (Dr.GRPO)
    assert torch.allclose(dr[0], g0 - 0.5)


def test_clip_is_asymmetric_and_pessimistic():
    mask = torch.ones(1, 1)
    def loss(ratio, adv):
        lp = torch.log(torch.tensor([[ratio]]))
        per, cf = policy_loss(lp, torch.zeros(1, 1), torch.tensor([adv]), mask, 0.2, 0.28)
        return per.item(), cf
    # positive advantage: the gain is capped at ratio 1 + eps_clip_high = 1.28
    assert abs(loss(1.5, 1.0)[0] - (-1.28)) < 1e-6 and loss(1.5, 1.0)[1] == 1.0
    assert abs(loss(1.1, 1.0)[0] - (-1.1)) < 1e-6 and loss(1.1, 1.0)[1] == 0.0
    # negative advantage: below 1 - eps_clip = 0.8 the loss stops improving (clipped at 0.8)...
    assert abs(loss(0.5, -1.0)[0] - 0.8) < 1e-6
    # ...but above 1 + eps_high it is NOT clipped (max of the two terms keeps the pessimistic one)
    assert abs(loss(2.0, -1.0)[0] - 2.0) < 1e-6
    assert abs(loss(1.0, 2.0)[0] - (-2.0)) < 1e-6  # on-policy: ratio 1, loss = -A


def test_per_sample_token_mean_and_gradient_sign():
    logp = torch.zeros(2, 4, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    per, _ = policy_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask, 0.2, 0.28)
    assert torch.allclose(per, torch.tensor([-1.0, 1.0]))  # each sample: mean over its own response tokens
    per.sum().backward()
    g = logp.grad
    assert (g[0, :2] < 0).all() and (g[0, 2:] == 0).all()  # descent raises log-probs of the rewarded sample
    assert (g[1] > 0).all()


def test_low_var_kl():
    lp = torch.tensor([0.0, -1.0, -2.0])
    assert torch.allclose(low_var_kl(lp, lp), torch.zeros(3))
    k = low_var_kl(torch.tensor([-1.0]), torch.tensor([-2.0]))
    r = -1.0
    assert abs(k.item() - (torch.exp(torch.tensor(r)) - 1 - r).item()) < 1e-6 and k.item() >= 0
