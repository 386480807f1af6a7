"""The ``channel`` part of the router: the worker's shared channels."""

from channels.routing import ChannelNameRouter

from gateway.contracts import WORKER_CHANNELS
from veena_site.worker import GpuWorkerConsumer

worker_app = GpuWorkerConsumer.as_asgi()
channel_router = ChannelNameRouter(
    {name: worker_app for name in WORKER_CHANNELS.values()}
)
