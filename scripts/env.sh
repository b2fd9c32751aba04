# Sourced by the scripts: which torch to build against (KWKER_TORCH, default 2.14.1), its virtual
# environment (VENV; KWKER_VENV overrides) and the torch requirements (TORCH_REQS).
TORCH_VERSION=${KWKER_TORCH:-2.14.1}
if [ "$TORCH_VERSION" = "2.14.1" ]; then
  VENV=${KWKER_VENV:-.venv}
  TORCH_REQS=("torch==2.14.1" "torchvision==0.29.1")
else
  VENV=${KWKER_VENV:-.venv-torch$TORCH_VERSION}
  TORCH_REQS=("torch==$TORCH_VERSION")
fi
