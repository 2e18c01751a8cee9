"""What `python -m bench` prints of each part, apart from what measures it.

The modules beside the parts (`bench.loopback`, `bench.durable`, ...) measure and return
figures; these word them, a line a load, with each target's verdict, and say how each part
ran. A module an idea of the bench: the speed the service keeps, what durability costs,
whether costs stay put as a store grows, and what webhooks cost.
"""
