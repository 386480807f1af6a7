"""The gateway side of a worker job: the base API consumer, the worker link (placement,
acceptance, loss detection, abandon), the timed receive, the consumer timers and the control
budget. Runs only in a gateway process; nothing of the worker imports it."""
