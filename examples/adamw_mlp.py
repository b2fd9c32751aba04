"""20 steps of AdamW on a 2-layer MLP, once with torch's own optimizer step and once on Kwker, from the
same start: prints True when parameters and optimizer state come out bit for bit the same."""

import copy

import torch

import kwker.torch_ops as kto

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
data, target = torch.randn(512, 64), torch.randint(0, 10, (512,))


def train(model):
    model = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(20):
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()
    state = [t for s in optimizer.state.values() for t in s.values()]
    return list(model.parameters()) + state


expected = train(model)
kto.install()
actual = train(model)
served = kto.stats()["adam"]["kwker"]
kto.uninstall()
print(served > 0 and all(torch.equal(e, a) for e, a in zip(expected, actual)))
