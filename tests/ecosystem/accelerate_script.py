"""A custom loop with accelerate.Accelerator, as accelerate's quick tour writes one:
`python accelerate_script.py cpu|tpu STATE_DIR`, or under torchrun. prepare, backward, gather, save_state and
load_state; prints the device, the losses and a parameter sum as JSON."""

import json
import sys

import torch
from accelerate import Accelerator

accelerator = Accelerator(cpu=sys.argv[1] == "cpu")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
g = torch.Generator().manual_seed(1)
dataset = torch.utils.data.TensorDataset(
    torch.randn(32, 8, generator=g), torch.randn(32, 2, generator=g)
)
loader = torch.utils.data.DataLoader(dataset, batch_size=8)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
losses = []
for x, y in loader:
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    losses.append(accelerator.gather(loss.detach()).mean().item())
accelerator.save_state(sys.argv[2])
accelerator.wait_for_everyone()  # the main process writes the model; the others then read it
before = [p.detach().clone() for p in model.parameters()]
with torch.no_grad():
    for p in model.parameters():
        p.zero_()
accelerator.load_state(sys.argv[2])
restored = all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
total = sum(p.detach().double().sum().item() for p in model.parameters())
print(
    json.dumps(
        {
            "device": str(accelerator.device),
            "processes": accelerator.num_processes,
            "losses": losses,
            "sum": total,
            "restored": restored,
        }
    )
)
