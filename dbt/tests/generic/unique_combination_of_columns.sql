-- The grain of a model: no two rows share the values of `combination_of_columns` (nulls
-- compare equal here, so a null key part cannot hide a duplicate). Same name and argument as
-- dbt_utils' test, which this project does not install.
{% test unique_combination_of_columns(model, combination_of_columns) %}
select {{ combination_of_columns | join(', ') }}, count(*) as n_rows
from {{ model }}
group by {{ combination_of_columns | join(', ') }}
having count(*) > 1
{% endtest %}
