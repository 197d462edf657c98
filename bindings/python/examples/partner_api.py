"""An asyncio service that caps its calls to a partner API at 4 at a time
and its GPU inference at half a GPU per call, with a deadline per call and
cancellation that never leaks a slot.

    CRONOQ_NUM_GPUS=1 python3 partner_api.py
"""

import asyncio
import os

import cronoq

pool = cronoq.Pool(budgets={"partner-api": 4}, devices={"gpu": "auto"})
CALL = pool.request({"partner-api": 1})
INFER = pool.request({"gpu": 0.5, "partner-api": 1})
peak = 0
active = 0


async def call_partner(i: int) -> str:
    global active, peak
    async with pool.acquire_async(CALL, timeout=10.0):
        active += 1
        peak = max(peak, active)
        try:
            await asyncio.sleep(0.01)  # the partner's latency
        finally:
            active -= 1
    return "call %d" % i


async def infer(i: int) -> str:
    async with pool.acquire_async(INFER, timeout=10.0) as grant:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=grant.cuda_visible())
        await asyncio.sleep(0.01)  # a subprocess would get `env`
    return "inference %d on GPU %s" % (i, env["CUDA_VISIBLE_DEVICES"])


async def main() -> None:
    calls = [asyncio.create_task(call_partner(i)) for i in range(40)]
    slow = asyncio.create_task(call_partner(99))
    slow.cancel()  # a caller that gave up: its slot (won or not) comes back
    results = await asyncio.gather(*calls)
    inferences = await asyncio.gather(*(infer(i) for i in range(4)))
    print("%d calls, at most %d at a time" % (len(results), peak))
    print("\n".join(inferences))
    free = pool.resource("partner-api")
    print("partner-api in use at the end: %d of %d" % (free.in_use, free.capacity))


if __name__ == "__main__":
    asyncio.run(main())
