"""Start a run, stream it from its first event, answer its clarification question.

  PYTHONPATH=clients/python python3 clients/python/examples/ask.py "Compare our revenue across periods." "Q2 vs Q3 2026"

BAAGENT_GRPC is the gateway (default localhost:7700); BAAGENT_API_KEY, when set,
is sent as the bearer key (a gateway without keys serves loopback callers).
"""
import os
import sys
import time

import grpc

from baagent.v1 import gateway_pb2, gateway_pb2_grpc, orchestrator_pb2, run_pb2

question, answer = sys.argv[1], sys.argv[2]
gateway = gateway_pb2_grpc.GatewayServiceStub(grpc.insecure_channel(os.environ.get("BAAGENT_GRPC", "localhost:7700")))
key = os.environ.get("BAAGENT_API_KEY")
auth = [("authorization", "Bearer " + key)] if key else []


def submit(run_id, question_id):
    # The question is published just before the run records that it waits:
    # an answer sent at once can be refused as FAILED_PRECONDITION; retry.
    for _ in range(100):
        try:
            return gateway.SubmitInput(gateway_pb2.SubmitInputRequest(
                run_id=run_id, input=orchestrator_pb2.RunInput(input_id=question_id, answer=answer)), metadata=auth)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.FAILED_PRECONDITION:
                raise
            time.sleep(0.05)
    raise RuntimeError("the run never waited for the answer")


request = gateway_pb2.StartRunStreamRequest(spec=run_pb2.RunSpec(input=question))
for msg in gateway.StartRunStream(request, metadata=auth):
    if msg.HasField("run"):  # the first message: the run itself
        run_id = msg.run.run_id
        print("run", run_id)
        continue
    event = msg.event
    print(event.seq, event.type)
    if event.HasField("clarification_asked"):
        print("  question:", event.clarification_asked.question, "->", answer)
        submit(run_id, event.clarification_asked.question_id)
    elif event.HasField("complete"):
        print(event.complete.content)
    elif event.HasField("error"):
        sys.exit("run failed: " + event.error.message)
    elif event.HasField("cancelled"):
        sys.exit("run cancelled")
