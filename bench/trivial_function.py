"""The trivial function the cold-start bench compares with: functions-framework, nothing imported,
answers 201 with a small JSON body."""

import functions_framework


@functions_framework.http
def trivial(request):
    return {"ok": True}, 201
