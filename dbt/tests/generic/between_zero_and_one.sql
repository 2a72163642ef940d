-- A share or ratio column: every non-null value lies in [0, 1]. Rows failing the test are
-- returned; a null (a share of nothing, e.g. 0 conditional requests) passes.
{% test between_zero_and_one(model, column_name) %}
select {{ column_name }}
from {{ model }}
where {{ column_name }} is not null
  and not ({{ column_name }} >= 0 and {{ column_name }} <= 1)
{% endtest %}
