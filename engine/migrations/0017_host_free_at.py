from django.db import migrations, models


class Migration(migrations.Migration):
    # 0016 is another change of issue 32 (key tiers); at the merge this one follows it.
    dependencies = [
        ('engine', '0015_host_figures_and_job_log'),
    ]

    operations = [
        migrations.AddField(
            model_name='enginehost',
            name='free_at',
            field=models.DateTimeField(blank=True, help_text='Last time this host asked for work with room to spare (placement by key).', null=True),
        ),
    ]
