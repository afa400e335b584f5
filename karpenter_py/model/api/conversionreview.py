"""The ``apiextensions.k8s.io/v1`` ConversionReview a CRD conversion webhook answers (pure).

The API server POSTs ``{"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
"request": {"uid", "desiredAPIVersion", "objects"}}``; the answer carries the same ``uid``,
``convertedObjects`` in ``desiredAPIVersion`` (in request order) and ``result.status``
``Success``, or ``Failure`` with a ``message`` the API server passes on to the client (then no
object is converted and nothing is written). Conversion is ``karpenter_py.model.api.convert``.

Converting a v1beta1 NodeClaim to v1 reads its NodePool: the webhook fetches the ones
:func:`nodepools_needed` names and passes those that exist to :func:`review_response`.
"""

from __future__ import annotations

from typing import Final, cast

from karpenter_py.model.api.convert import (
    ConversionError,
    NodePools,
    convert,
    json_problem,
    nodepool_needed,
)

JSON = dict[str, object]

REVIEW_API_VERSION: Final = "apiextensions.k8s.io/v1"
REVIEW_KIND: Final = "ConversionReview"


class ReviewError(ValueError):
    """The body is not a ConversionReview request, or nests deeper than conversion goes
    (``convert.MAX_NESTING``): answered with HTTP 400."""


def _request_of(review: object) -> JSON:
    if not isinstance(review, dict):
        raise ReviewError("expected a ConversionReview object")
    body = cast(JSON, review)
    if body.get("apiVersion") != REVIEW_API_VERSION or body.get("kind") != REVIEW_KIND:
        raise ReviewError(
            f"expected {REVIEW_KIND} {REVIEW_API_VERSION}, got "
            f"{body.get('kind')!r} {body.get('apiVersion')!r}"
        )
    request = body.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise ReviewError("ConversionReview has no request.uid")
    problem = json_problem(body)
    if problem is not None:
        raise ReviewError(f"ConversionReview {problem}")
    return cast(JSON, request)


def nodepools_needed(review: object) -> list[str]:
    """The NodePools converting this request's objects reads (sorted, no repeats); raises
    ReviewError for a malformed request."""
    request = _request_of(review)
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    if not isinstance(desired, str) or not isinstance(objects, list):
        return []  # review_response answers these with the reason
    names = {nodepool_needed(obj, desired) for obj in cast(list[object], objects)}
    return sorted(name for name in names if name is not None)


def failure_response(review: object, message: str) -> JSON:
    """A Failure answer to a well-formed request (nothing is converted)."""
    request = _request_of(review)
    response: JSON = {
        "uid": request["uid"],
        "convertedObjects": [],
        "result": {"status": "Failure", "message": message},
    }
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def review_response(review: object, nodepools: NodePools | None = None) -> JSON:
    """The ConversionReview response for a request; raises ReviewError for a malformed one.
    ``nodepools``: the existing v1 NodePools :func:`nodepools_needed` named, by name."""
    request = _request_of(review)
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    response: JSON = {"uid": request["uid"]}
    try:
        if not isinstance(desired, str) or not desired:
            raise ConversionError("request.desiredAPIVersion is required")
        if not isinstance(objects, list):
            raise ConversionError("request.objects must be a list")
        converted = []
        for i, obj in enumerate(cast(list[object], objects)):
            try:
                converted.append(convert(obj, desired, nodepools or {}))
            except ConversionError as err:
                raise ConversionError(f"{_describe(obj, i)}: {err}") from None
    except ConversionError as err:
        return failure_response(review, str(err))
    else:
        response["convertedObjects"] = converted
        response["result"] = {"status": "Success"}
    return {"apiVersion": REVIEW_API_VERSION, "kind": REVIEW_KIND, "response": response}


def _describe(obj: object, index: int) -> str:
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if isinstance(name, str) and name:
            return f"{obj.get('kind')} {name}"
    return f"objects[{index}]"
